package effects

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
)

// execProbe runs a consumer-side command once per batch: `sh -c COMMAND`,
// event IDs on stdin one a line, one NDJSON record a line on stdout.
type execProbe struct {
	command string
	display string
	timeout time.Duration
}

func openExec(command string, opts Options) (*execProbe, error) {
	if strings.TrimSpace(command) == "" {
		return nil, backend.Configf("effects exec: no command (want exec:COMMAND)")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		return nil, fmt.Errorf("effects exec: %w", err)
	}
	return &execProbe{command: command, display: "exec:" + redactCommand(command), timeout: opts.Timeout}, nil
}

// userinfoPassword finds the password of URLs written inside a command,
// as in `psql postgres://app:secret@db/app -c …`.
var userinfoPassword = regexp.MustCompile(`(://[^/\s:@]*):[^@\s]*@`)

func redactCommand(command string) string {
	return userinfoPassword.ReplaceAllString(command, "$1:"+redacted+"@")
}

// Records runs the command once for the whole batch.
func (p *execProbe) Records(ctx context.Context, eventIDs []string) (map[string]Record, error) {
	ids := batch(eventIDs)
	res := newResults(ids)
	if len(ids) == 0 {
		return res.got, nil
	}
	var stdin bytes.Buffer
	for _, id := range ids {
		if strings.ContainsAny(id, "\r\n") {
			return nil, fmt.Errorf("%s: event ID %q holds a line break and cannot be sent one a line", p, id)
		}
		stdin.WriteString(id + "\n")
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", p.command)
	cmd.Stdin = &stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = execWaitDelay
	killGroup(cmd)
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w%s", p, ctx.Err(), p.stderr(&stderr))
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		return nil, fmt.Errorf("%s: %w%s", p, err, p.stderr(&stderr))
	}
	sc := bufio.NewScanner(&stdout)
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
			err = res.add(rec)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: stdout line %d %q: %v (want {\"event_id\",\"attempts\",\"effects\",\"fingerprint\"} one a line)%s",
				p, n, truncate(string(line), 200), err, p.stderr(&stderr))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: stdout: %w%s", p, err, p.stderr(&stderr))
	}
	return res.got, nil
}

func (p *execProbe) stderr(b *bytes.Buffer) string {
	if s := truncate(b.String(), execStderrMax); s != "" {
		return "; stderr: " + s
	}
	return ""
}

func (p *execProbe) String() string { return p.display }

func (p *execProbe) Close() error { return nil }
