package testproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The Java servers' harnesses (pulsartest, kafkatest, sqstest) drive a
// script in scripts/ that fetches, starts and stops the server by PID;
// these are the parts they share.

// CheckJava reports missing, with notFound as the message, when neither
// JAVA_HOME nor PATH has a java.
func CheckJava(notFound string) error {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		if fi, err := os.Stat(filepath.Join(home, "bin", "java")); err == nil && !fi.IsDir() {
			return nil
		}
	}
	if _, err := exec.LookPath("java"); err != nil {
		return errors.New(notFound)
	}
	return nil
}

// FindScript finds rel (e.g. scripts/kafka.sh) from this source file, or
// else from the working folder up to the module root.
func FindScript(rel string) (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", rel)
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
		tried = append(tried, p)
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, rel)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			tried = append(tried, p)
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil || filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("%s not found (tried %s)", rel, strings.Join(tried, ", "))
}

// RunScript runs script with bash and returns its standard output; its
// standard error goes into the error and, when progress is not nil, to
// progress too. watchVar (e.g. KAFKA_WATCH_PID) is set to this process's
// PID, so that the script's watchdog stops the server should the test
// binary die without stopping it.
func RunScript(timeout time.Duration, progress io.Writer, watchVar, script string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		return "", fmt.Errorf("bash not found: %s needs it", filepath.Base(script))
	}
	cmd := exec.CommandContext(ctx, bash, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), watchVar+"="+strconv.Itoa(os.Getpid()))
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if progress != nil {
		cmd.Stderr = io.MultiWriter(&stderr, progress)
	}
	// The servers and the watchdogs write to files, never to these pipes;
	// WaitDelay is a guard should that ever change.
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s", timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		return stdout.String(), fmt.Errorf("%s %s: %v\n%s", filepath.Base(script), strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// ReadEnv parses a script's KEY=VALUE env file (blank lines and # comments
// allowed).
func ReadEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		env[k] = v
	}
	return env, sc.Err()
}
