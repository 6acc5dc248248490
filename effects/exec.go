package effects

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/dlqctl/dlqctl/backend"
)

const (
	// execWaitDelay bounds the wait for the output pipes once the command
	// has exited or been killed: a background child of the script may hold
	// them open.
	execWaitDelay = 2 * time.Second
	// execMaxLine bounds one NDJSON line.
	execMaxLine = 1 << 20
	// execStderrMax is how much of the command's stderr an error quotes.
	execStderrMax = 2000
	// execMaxStdout bounds all of one run's stdout: a batch's records are
	// small, and a runaway command must not fill dlqctl's memory. The run
	// fails when its output goes past it.
	execMaxStdout = 64 << 20
)

// errStdoutTooLong: the command wrote more than execMaxStdout.
var errStdoutTooLong = fmt.Errorf("stdout over %d MiB: stopped", execMaxStdout>>20)

// boundedBuffer takes writes until max bytes, then fails them (and so the
// copy from the command's stdout, which gets EPIPE); with discard it
// keeps the first max bytes and drops the rest quietly (stderr).
//
// The buffer is a field, not embedded: an embedded bytes.Buffer would lend
// its ReadFrom to io.Copy, which would then bypass Write and its bound.
type boundedBuffer struct {
	buf     bytes.Buffer
	max     int
	discard bool
	// over, when set, is called once the bound is passed: it kills the
	// command, which would otherwise block on a full pipe until timeout.
	over       func()
	overflowed bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if len(p) <= room {
		return b.buf.Write(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	if b.discard {
		return len(p), nil
	}
	if !b.overflowed && b.over != nil {
		b.over()
	}
	b.overflowed = true
	return 0, errStdoutTooLong
}

// secretEnv says whether an environment variable must not reach an
// effects command: the approval key, and every password, token, secret,
// key or credential that dlqctl or its backends read (DLQCTL_*, AWS_*),
// so that a consumer-side script can neither approve a plan nor reach the
// DLQ's broker with dlqctl's credentials.
func secretEnv(name string) bool {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "DLQCTL_") && !strings.HasPrefix(n, "AWS_") {
		return false
	}
	for _, w := range []string{"KEY", "PASSWORD", "PASSWD", "TOKEN", "SECRET", "CREDENTIAL", "PASS"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// scrubbedEnv is env without the secret variables.
func scrubbedEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !secretEnv(name) {
			out = append(out, kv)
		}
	}
	return out
}

// execProbe runs a consumer-side command once per batch: `sh -c COMMAND`,
// event IDs on stdin one a line (exec:) or one {"event_id":…} object a
// line (exec+ndjson:), one NDJSON record a line on stdout.
type execProbe struct {
	// ndjson frames stdin as NDJSON, so that an ID may hold a line break.
	ndjson  bool
	command string
	display string
	timeout time.Duration
	environ func() []string
}

func openExec(command string, ndjson bool, opts Options) (*execProbe, error) {
	if strings.TrimSpace(command) == "" {
		return nil, backend.Configf("effects exec: no command (want exec:COMMAND or exec+ndjson:COMMAND)")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		return nil, fmt.Errorf("effects exec: %w", err)
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ
	}
	scheme := "exec:"
	if ndjson {
		scheme = "exec+ndjson:"
	}
	return &execProbe{ndjson: ndjson, command: command, display: scheme + redactCommand(command), timeout: opts.Timeout, environ: environ}, nil
}

// userinfoPassword finds the password of URLs written inside a command,
// as in `psql postgres://app:secret@db/app -c …`.
var userinfoPassword = regexp.MustCompile(`(://[^/\s:@]*):[^@\s]*@`)

func redactCommand(command string) string {
	return userinfoPassword.ReplaceAllString(command, "$1:"+redacted+"@")
}

// stdin frames the batch's IDs. exec: writes one a line, as plain text;
// an ID holding a line break cannot travel so, and fails the batch rather
// than arrive as two IDs. exec+ndjson: writes one {"event_id":…} a line:
// as a JSON string an ID may hold any byte.
func (p *execProbe) stdin(ids []string) (*bytes.Buffer, error) {
	var stdin bytes.Buffer
	if !p.ndjson {
		for _, id := range ids {
			if strings.ContainsAny(id, "\r\n") {
				return nil, fmt.Errorf("%s: event ID %q holds a line break, which one-a-line input cannot carry: use exec+ndjson:COMMAND, whose stdin is one {\"event_id\":…} a line", p, id)
			}
			stdin.WriteString(id)
			stdin.WriteByte('\n')
		}
		return &stdin, nil
	}
	enc := json.NewEncoder(&stdin)
	enc.SetEscapeHTML(false)
	for _, id := range ids {
		if err := enc.Encode(struct {
			EventID string `json:"event_id"`
		}{id}); err != nil {
			return nil, fmt.Errorf("%s: event ID %q: %w", p, id, err)
		}
	}
	return &stdin, nil
}

// Records runs the command once for the whole batch.
func (p *execProbe) Records(ctx context.Context, eventIDs []string) (map[string]Record, error) {
	ids := Batch(eventIDs)
	res := NewResults(ids)
	if len(ids) == 0 {
		return res.got, nil
	}
	stdin, err := p.stdin(ids)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", p.command)
	cmd.Stdin = stdin
	cmd.Env = scrubbedEnv(p.environ())
	stdout := &boundedBuffer{max: execMaxStdout, over: cancel}
	stderr := &boundedBuffer{max: 4 * execStderrMax, discard: true}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.WaitDelay = execWaitDelay
	killGroup(cmd)
	err = cmd.Run()
	switch {
	case stdout.overflowed:
		return nil, fmt.Errorf("%s: %w%s", p, errStdoutTooLong, p.stderr(stderr))
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w%s", p, ctx.Err(), p.stderr(stderr))
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		return nil, fmt.Errorf("%s: %w%s", p, err, p.stderr(stderr))
	}
	sc := bufio.NewScanner(&stdout.buf)
	sc.Buffer(nil, execMaxLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(line))
		err := dec.Decode(&rec)
		if err == nil && dec.More() {
			err = errors.New("more than one JSON value")
		}
		if err == nil && rec.EventID == "" {
			err = errors.New("no event_id")
		}
		if err == nil {
			err = res.Add(rec)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: stdout line %d %q: %v (want {\"event_id\",\"attempts\",\"effects\",\"fingerprint\"} one a line)%s",
				p, n, Truncate(string(line), 200), err, p.stderr(stderr))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: stdout: %w%s", p, err, p.stderr(stderr))
	}
	return res.got, nil
}

func (p *execProbe) stderr(b *boundedBuffer) string {
	if s := Truncate(b.buf.String(), execStderrMax); s != "" {
		return "; stderr: " + s
	}
	return ""
}

func (p *execProbe) String() string { return p.display }

func (p *execProbe) Close() error { return nil }
