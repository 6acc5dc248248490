package testproc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// JavaServer is what the Java servers' harnesses (kafkatest, pulsartest,
// sqstest) share about their server's life: its script in scripts/ fetches
// it, starts it on free loopback ports in a data folder (writing the
// addresses to DIR/env and the PID to a file) and stops it by that PID.
// Each harness keeps what is its own: the env keys it reads, what it
// writes in the folder first, and the restarts its tests need.
type JavaServer struct {
	Name         string // for messages: "the Kafka broker", "ElasticMQ"
	Script       string // from the module root: "scripts/kafka.sh"
	WatchVar     string // the script's watchdog variable: "KAFKA_WATCH_PID"
	TempPrefix   string // the data folder's name prefix: "kafkatest-"
	PIDFile      string // in the data folder: "kafka.pid"
	LogFile      string // in the data folder: "kafka.out", "logs/pulsar-standalone.log"
	JavaNotFound string // the error when no java is found

	FetchTimeout, StartTimeout, StopTimeout time.Duration
	// FetchProgress receives the fetch's progress (a cold fetch downloads
	// for minutes); nil keeps it quiet.
	FetchProgress io.Writer
	// Prepare, when set, writes what the server needs in a new data folder
	// before its first start (Kafka's TLS certificates).
	Prepare func(dir string) error
}

// startAttempts covers the race between a script picking free ports and
// the server binding them.
const startAttempts = 3

// JavaProc is one server's data folder and the script that runs it there.
// Its methods are safe to call from several goroutines; after Stop the
// others fail.
type JavaProc struct {
	s      *JavaServer
	script string
	dir    string
	// read takes what the harness needs from the env file each start
	// writes (the addresses, which stay the same over restarts).
	read func(env map[string]string) error

	mu      sync.Mutex
	stopped bool // Stop was called; the folder is gone
}

// Launch checks for java, fetches the server when it is not cached, and
// starts it in a new temporary folder; read takes the addresses from the
// env file the script writes, at this start and at every restart. When the
// port was taken between the script's pick and the bind it tries again in
// a new folder. The caller must Stop the process; should the test binary
// die first, the watchdog the script leaves stops the server.
func (s *JavaServer) Launch(read func(env map[string]string) error) (*JavaProc, error) {
	if err := CheckJava(s.JavaNotFound); err != nil {
		return nil, err
	}
	script, err := FindScript(s.Script)
	if err != nil {
		return nil, err
	}
	if _, err := RunScript(s.FetchTimeout, s.FetchProgress, s.WatchVar, script, "fetch"); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", s.Name, err)
	}
	var lastErr error
	for range startAttempts {
		p, err := s.launchIn(script, read)
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !portTaken(err) {
			break
		}
	}
	return nil, lastErr
}

func (s *JavaServer) launchIn(script string, read func(env map[string]string) error) (*JavaProc, error) {
	dir, err := os.MkdirTemp("", s.TempPrefix)
	if err != nil {
		return nil, err
	}
	p := &JavaProc{s: s, script: script, dir: dir, read: read}
	if s.Prepare != nil {
		if err := s.Prepare(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := p.start(); err != nil {
		_ = p.halt()
		os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
}

func portTaken(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Address already in use") || strings.Contains(msg, "BindException")
}

// start starts the server in its folder, one Java start of the machine
// at a time (LockJavaStart), and hands the KEY=VALUE pairs the script
// wrote to DIR/env once the server was ready to read.
func (p *JavaProc) start() error {
	release, err := LockJavaStart()
	if err != nil {
		return err
	}
	defer release()
	out, err := p.run(p.s.StartTimeout, "start", p.dir)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.s.Name, err)
	}
	env, err := ReadEnv(filepath.Join(p.dir, "env"))
	if err != nil {
		return fmt.Errorf("start %s: %w (script output: %s)", p.s.Name, err, out)
	}
	return p.read(env)
}

// Require is an error naming the keys env lacks, nil when it has them all.
func (s *JavaServer) Require(env map[string]string, keys ...string) error {
	var missing []string
	for _, k := range keys {
		if env[k] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("start %s: its env file lacks %s", s.Name, strings.Join(missing, ", "))
	}
	return nil
}

// halt stops the server (the script sends SIGTERM, then SIGKILL) and
// keeps its folder.
func (p *JavaProc) halt() error {
	if _, err := p.run(p.s.StopTimeout, "stop", p.dir); err != nil {
		return fmt.Errorf("stop %s: %w", p.s.Name, err)
	}
	return nil
}

// live locks p for op and fails when Stop came first; the caller unlocks.
func (p *JavaProc) live(op string) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("%s of %s after Stop", op, p.s.Name)
	}
	return nil
}

// Down stops the server and keeps its ports and folder, so that Up brings
// it back on the same address with its data (a server outage).
func (p *JavaProc) Down() error {
	if err := p.live("down"); err != nil {
		return err
	}
	defer p.mu.Unlock()
	return p.halt()
}

// Up starts a server taken Down or Killed again, on the same ports and
// folder; it returns once the script found it ready.
func (p *JavaProc) Up() error {
	if err := p.live("up"); err != nil {
		return err
	}
	defer p.mu.Unlock()
	return p.start()
}

// Restart is Down then Up.
func (p *JavaProc) Restart() error {
	if err := p.live("restart"); err != nil {
		return err
	}
	defer p.mu.Unlock()
	if err := p.halt(); err != nil {
		return err
	}
	return p.start()
}

// Kill ends the server with SIGKILL, as a crash does (no clean shutdown:
// what it held only in memory is lost), and keeps its folder for Up.
func (p *JavaProc) Kill() error {
	if err := p.live("kill"); err != nil {
		return err
	}
	defer p.mu.Unlock()
	return p.kill()
}

// Stop stops the server and removes its folder; when the stop fails it
// keeps the folder, whose logs explain what went wrong. It is safe to call
// more than once.
func (p *JavaProc) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	if err := p.halt(); err != nil {
		return fmt.Errorf("%w (output in %s)", err, p.dir)
	}
	return os.RemoveAll(p.dir)
}

// Dir is the server's data folder (config, data, logs).
func (p *JavaProc) Dir() string { return p.dir }

// PID is the server's process id, or 0 when it is not running.
func (p *JavaProc) PID() int {
	raw, err := os.ReadFile(filepath.Join(p.dir, p.s.PIDFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0
	}
	return pid
}

// LogTail is the last lines of the server's log, for a failing test's
// report.
func (p *JavaProc) LogTail(lines int) string {
	raw, err := os.ReadFile(filepath.Join(p.dir, p.s.LogFile))
	if err != nil {
		return fmt.Sprintf("(no log of %s: %v)", p.s.Name, err)
	}
	return LastLines(string(raw), lines)
}

func (p *JavaProc) run(timeout time.Duration, args ...string) (string, error) {
	return RunScript(timeout, nil, p.s.WatchVar, p.script, args...)
}
