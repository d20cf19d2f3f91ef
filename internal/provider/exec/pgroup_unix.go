//go:build unix

package exec

import (
	osexec "os/exec"
	"syscall"
)

// killGroup runs cmd in its own process group and makes cancellation
// kill the whole group, so that a script's children (a cloud CLI it
// started) die with it instead of holding the call open.
func killGroup(cmd *osexec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
