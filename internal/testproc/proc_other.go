//go:build !linux

package testproc

import (
	"errors"
	"time"
)

// The broker faults of proc_linux.go read /proc and cut sockets through
// the kernel's SOCK_DESTROY: elsewhere they say so.

var errLinuxOnly = errors.New("needs Linux (/proc, ss -K, unshare)")

// ProcState is always 0 here.
func ProcState(int) byte { return 0 }

// CPUTime is always 0 here.
func CPUTime(int) time.Duration { return 0 }

// KillProcess needs Linux here.
func KillProcess(int) error { return errLinuxOnly }

// Freeze needs Linux here.
func Freeze(int) error { return errLinuxOnly }

// Thaw needs Linux here.
func Thaw(int) error { return errLinuxOnly }

// TCPConn is one end of an established TCP connection.
type TCPConn struct {
	LocalPort, RemotePort int
	RxQueue               int
}

// Drain needs Linux here.
func Drain(int, []TCPConn) (int, error) { return 0, errLinuxOnly }

// Conns needs Linux here.
func Conns(int) ([]TCPConn, error) { return nil, errLinuxOnly }

// Between needs Linux here.
func Between(int, int) ([]TCPConn, []TCPConn, error) { return nil, nil, errLinuxOnly }

// Cut needs Linux here.
func Cut([]TCPConn) error { return errLinuxOnly }

// PIDNamespace needs Linux here.
func PIDNamespace() ([]string, error) { return nil, errLinuxOnly }

// ListenerPID needs Linux here.
func ListenerPID(int) (int, error) { return 0, errLinuxOnly }
