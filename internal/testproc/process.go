package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Process is one server process that a harness runs itself rather than
// through a script (redis-server, nats-server, postgres): its output in a
// Log, a channel closed when it exits, a wait until it answers, and a stop
// that asks before it kills. The harness builds the command; the
// lifecycle is this one.
type Process struct {
	cmd     *exec.Cmd
	log     *Log
	exited  chan struct{}
	waitErr error // valid once exited is closed
}

// Launch starts cmd with its output going to log, and returns once it
// runs. cmd's Stdout and Stderr are set here.
func Launch(cmd *exec.Cmd, log *Log) (*Process, error) {
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// WaitReady calls ready every `every` until it returns nil. It fails when
// the process exits first, or when timeout passes, with ready's last
// error; both errors end with the tail of the server's output. name names
// the server in them ("redis-server").
func (p *Process) WaitReady(name string, timeout, every time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%v):\n%s", name, p.waitErr, p.log.Tail(3000))
		default:
		}
		if last = ready(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (%v):\n%s", name, timeout, last, p.log.Tail(3000))
		}
		select {
		case <-p.exited:
		case <-time.After(every):
		}
	}
}

// Stop asks the process to end with sig and kills it when it has not
// after grace, waiting for it either way. Killing it is an error, which
// names name and the signal. A process that has exited is left alone.
func (p *Process) Stop(name string, sig os.Signal, grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	p.Kill()
	return fmt.Errorf("%s (pid %d) did not stop on %v within %s; killed it", name, p.PID(), sig, grace)
}

// Kill kills the process (SIGKILL, as a crash does) and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// PID is the process's ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Args are the command line it was started with (to start it again).
func (p *Process) Args() []string { return p.cmd.Args }
