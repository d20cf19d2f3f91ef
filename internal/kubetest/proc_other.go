//go:build !linux

package kubetest

import (
	"errors"
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func cpuTime(int) (time.Duration, error) {
	return 0, errors.New("kubetest: CPU time is read from /proc, on Linux only")
}
