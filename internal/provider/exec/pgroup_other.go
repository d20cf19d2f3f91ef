//go:build !unix

package exec

import osexec "os/exec"

// killGroup leaves cmd as it is: without process groups, cancellation
// kills the script alone.
func killGroup(cmd *osexec.Cmd) {}
