//go:build linux

package testproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The conformance suite's broker faults: a broker killed as a crash kills
// it, frozen and thawed, and the TCP connections between a process and
// the broker cut while the process waits on them. Linux only: they read
// /proc and cut sockets with ss -K (the kernel's SOCK_DESTROY).

// ProcState is the state letter of pid in /proc/PID/stat ('R', 'S', 'T'
// for stopped, 'Z' for a zombie), or 0 when there is no such process.
func ProcState(pid int) byte {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}

// CPUTime is the processor time pid has used so far (user and system),
// from /proc/PID/stat; 0 when there is no such process.
func CPUTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	// After the name: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime (clock ticks, 100 a second).
	fs := strings.Fields(s[i+1:])
	if len(fs) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fs[11], 10, 64)
	st, _ := strconv.ParseInt(fs[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// group is pid and, when pid leads a process group of its own (a server
// started with setsid), every other process in that group: the processes
// that make up the server. A process in the test binary's own group is
// taken alone.
func group(pid int) []int {
	pgid, err := syscall.Getpgid(pid)
	if err != nil || pgid == syscall.Getpgrp() {
		return []int{pid}
	}
	pids := []int{pid}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil || p == pid {
			continue
		}
		if g, err := syscall.Getpgid(p); err == nil && g == pgid {
			pids = append(pids, p)
		}
	}
	return pids
}

// KillProcess ends pid with SIGKILL, as a crash does (with the rest of its
// process group when it leads one of its own), and waits until it is
// gone: exited, or a zombie its parent has yet to reap.
func KillProcess(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("kill: no process (pid %d)", pid)
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid != syscall.Getpgrp() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill pid %d: %w", pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st := ProcState(pid); st == 0 || st == 'Z' || st == 'X' {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still alive 30 s after SIGKILL", pid)
		}
	}
}

// Freeze stops pid (SIGSTOP; its whole process group when it leads one of
// its own) and waits until every one of those processes is stopped; Thaw
// lets them go on.
func Freeze(pid int) error {
	pids := group(pid)
	for _, p := range pids {
		if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("freeze pid %d: %w", p, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		stopped := true
		for _, p := range pids {
			if st := ProcState(p); st != 'T' && st != 't' && st != 0 && st != 'Z' {
				stopped = false
			}
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d did not stop within 10 s of SIGSTOP", pid)
		}
	}
}

// Thaw sends SIGCONT to pid (and its own process group, as Freeze).
func Thaw(pid int) error {
	var first error
	for _, p := range group(pid) {
		if err := syscall.Kill(p, syscall.SIGCONT); err != nil && first == nil && !errors.Is(err, syscall.ESRCH) {
			first = fmt.Errorf("thaw pid %d: %w", p, err)
		}
	}
	return first
}

// TCPConn is one end of an established TCP connection, as /proc/net/tcp
// shows it: its ports (loopback only matters here), and the bytes
// received that its process has not read yet.
type TCPConn struct {
	LocalPort, RemotePort int
	RxQueue               int
	inode                 string
}

// socketInodes are the inodes of the sockets that pid (with its own
// process group, as Freeze) holds open.
func socketInodes(pid int) (map[string]bool, error) {
	inodes := map[string]bool{}
	for _, p := range group(pid) {
		dir := fmt.Sprintf("/proc/%d/fd", p)
		fds, err := os.ReadDir(dir)
		if err != nil {
			if p == pid {
				return nil, fmt.Errorf("the sockets of pid %d: %w", pid, err)
			}
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join(dir, fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			}
		}
	}
	return inodes, nil
}

// tcpLine is one socket of /proc/net/tcp{,6}.
type tcpLine struct {
	TCPConn
	state string // "01" established, "0A" listening
}

// tcpTable reads the TCP sockets of pid's network namespace. A socket
// that no process has accepted yet has inode 0.
func tcpTable(pid int) []tcpLine {
	var lines []tcpLine
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local remote st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 {
				continue
			}
			_, rx, _ := strings.Cut(fs[4], ":")
			n, _ := strconv.ParseInt(rx, 16, 64)
			lines = append(lines, tcpLine{state: fs[3],
				TCPConn: TCPConn{LocalPort: hexPort(fs[1]), RemotePort: hexPort(fs[2]), RxQueue: int(n), inode: fs[9]}})
		}
		f.Close()
	}
	return lines
}

// Conns lists the established TCP connections that pid (with its own
// process group, as Freeze) holds open.
func Conns(pid int) ([]TCPConn, error) {
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	var conns []TCPConn
	for _, l := range tcpTable(pid) {
		if l.state == "01" && inodes[l.inode] {
			conns = append(conns, l.TCPConn)
		}
	}
	return conns, nil
}

func hexPort(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n, _ := strconv.ParseInt(p, 16, 32)
	return int(n)
}

// Between is the connections from client to a port server listens on,
// as seen from each side (client's ends, then server's), matched by port
// on the loopback interface. A server end may not be the server's yet (a
// connection in its accept queue, made while it was frozen): it counts
// all the same.
func Between(client, server int) (clientEnds, serverEnds []TCPConn, err error) {
	cinodes, err := socketInodes(client)
	if err != nil {
		return nil, nil, err
	}
	sinodes, err := socketInodes(server)
	if err != nil {
		return nil, nil, err
	}
	table := tcpTable(server)
	listening := map[int]bool{}
	byPorts := map[[2]int]TCPConn{}
	for _, l := range table {
		switch {
		case l.state == "0A" && sinodes[l.inode]:
			listening[l.LocalPort] = true
		case l.state == "01":
			byPorts[[2]int{l.LocalPort, l.RemotePort}] = l.TCPConn
		}
	}
	for _, l := range table {
		if l.state != "01" || !cinodes[l.inode] || !listening[l.RemotePort] {
			continue
		}
		if s, ok := byPorts[[2]int{l.RemotePort, l.LocalPort}]; ok {
			clientEnds = append(clientEnds, l.TCPConn)
			serverEnds = append(serverEnds, s)
		}
	}
	return clientEnds, serverEnds, nil
}

// Cut destroys both ends of each client connection (ss -K, the kernel's
// SOCK_DESTROY): the client's pending reads and writes fail at once with
// ECONNABORTED and the server sees a reset, as when a network path dies
// and both ends give up on it. It needs root (CAP_NET_ADMIN).
func Cut(clientEnds []TCPConn) error {
	ss, err := exec.LookPath("ss")
	if err != nil {
		return errors.New("ss not found: cutting a connection needs iproute2's ss (apt-get install iproute2)")
	}
	for _, c := range clientEnds {
		for _, filter := range [][2]int{{c.LocalPort, c.RemotePort}, {c.RemotePort, c.LocalPort}} {
			out, err := exec.Command(ss, "-K", "-t", "-n", "sport", "=", ":"+strconv.Itoa(filter[0]),
				"dport", "=", ":"+strconv.Itoa(filter[1])).CombinedOutput()
			if err != nil {
				return fmt.Errorf("ss -K: %v: %s", err, out)
			}
		}
	}
	return nil
}

// Drain reads and throws away, through a copy of its file descriptors
// (pidfd_getfd), what the process pid has received on the client ends
// ends and not read yet: answers it will now never see. It returns how
// many bytes it took. It needs the right to trace pid (root, or the
// same user under a permissive ptrace scope).
func Drain(pid int, ends []TCPConn) (int, error) {
	want := map[string]bool{}
	for _, c := range ends {
		want[c.inode] = true
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	total := 0
	buf := make([]byte, 64<<10)
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil || !want[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] {
			continue
		}
		target, _ := strconv.Atoi(fd.Name())
		local, err := unix.PidfdGetfd(pidfd, target, 0)
		if err != nil {
			return total, fmt.Errorf("pidfd_getfd %d of pid %d: %w", target, pid, err)
		}
		for {
			n, _, err := unix.Recvfrom(local, buf, unix.MSG_DONTWAIT)
			if n <= 0 || err != nil {
				break
			}
			total += n
		}
		unix.Close(local)
	}
	return total, nil
}

// PIDNamespace is the start of a command line that runs a command in a
// new PID namespace with its own /proc (so the processes outside it are
// not visible there) and the same host name, network and files: a
// container that shares the host's network and UTS namespace (Kubernetes
// hostNetwork, docker --uts=host --net=host). It checks first that this
// machine can make one, and says why not.
func PIDNamespace() ([]string, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, errors.New("unshare not found (util-linux): a PID namespace cannot be made here")
	}
	prefix := []string{unshare, "--pid", "--fork", "--mount-proc", "--kill-child"}
	if os.Geteuid() != 0 {
		prefix = append(prefix, "--user", "--map-root-user")
	}
	if out, err := exec.Command(prefix[0], append(prefix[1:], "true")...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s true: %v: %s (a PID namespace needs root or unprivileged user namespaces)",
			strings.Join(prefix, " "), err, strings.TrimSpace(string(out)))
	}
	return prefix, nil
}

// ListenerPID is the process that listens on the TCP port (any local
// address), found through /proc: the server behind an address when its
// harness does not say its PID.
func ListenerPID(port int) (int, error) {
	listening := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) >= 10 && fs[3] == "0A" && hexPort(fs[1]) == port {
				listening[fs[9]] = true
			}
		}
	}
	if len(listening) == 0 {
		return 0, fmt.Errorf("nothing listens on port %d", port)
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") && listening[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process found that holds the socket listening on port %d", port)
}
