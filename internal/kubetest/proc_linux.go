package kubetest

import "syscall"

// sysProcAttr kills a cluster's program when the test process dies
// without running Stop (a panic, a timeout), so none outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
