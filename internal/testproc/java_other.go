//go:build !unix

package testproc

import "fmt"

// kill is the unix SIGKILL's stand-in where there are no signals: the Java
// test servers are run only on unix machines.
func (p *JavaProc) kill() error {
	return fmt.Errorf("kill %s: needs unix signals", p.s.Name)
}
