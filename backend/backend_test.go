package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeURL is a fake backend's parsed URL: the URL as given.
type fakeURL string

func (u fakeURL) Display() string   { return RedactURL(string(u)) }
func (u fakeURL) Secrets() []string { return nil }

// parseFake takes every URL but those that say they are bad.
func parseFake(raw string) (fakeURL, error) {
	if strings.Contains(raw, "bad") {
		return fakeURL(raw), Configf("fake: %s is bad", raw)
	}
	return fakeURL(raw), nil
}

// fakeSourceOpen is a backend's Open that fails as a client library does:
// quoting the URL it was given, and with it the password.
func fakeSourceOpen(_ context.Context, u fakeURL, _ OpenOptions) (Source, error) {
	return nil, fmt.Errorf("dial %s: %w", string(u), fs.ErrPermission)
}

// testRegistry has a dir: backend and a fake network one, neither of
// which connects anywhere.
func testRegistry(opened *[]string) *Registry {
	r := NewRegistry()
	r.Register(Registration{Name: "dir", Schemes: []string{"dir"}, Title: "directory queue",
		Factory: NewFactory(func(raw string) (fakeURL, error) { return fakeURL(raw), nil },
			func(_ context.Context, u fakeURL, _ OpenOptions) (Source, error) {
				*opened = append(*opened, string(u))
				return nil, errors.New("not opened in this test")
			})})
	r.Register(Registration{Name: "fake", Schemes: []string{"fake", "fakes"}, Title: "Fake MQ", KeyFrom: "",
		Factory: NewFactory(parseFake, fakeSourceOpen),
		Secrets: func(o OpenOptions) []string {
			return []string{o.Env("FAKE_PASSWORD"), o.ProfileSecret("fake_token")}
		}})
	return r
}

func TestLookupRefusals(t *testing.T) {
	var opened []string
	r := testRegistry(&opened)
	for _, tc := range []struct {
		raw, want string
	}{
		{"incident", `source "incident" has no scheme: for a queue folder write dir:incident (other schemes: dir:, fake://, fakes://)`},
		{"redis://u:S3cretPW@h:6379/0", `source "redis://u:xxxxx@h:6379/0": unknown scheme "redis" (want one of dir:, fake://, fakes://)`},
		{"nope:x", `source "nope:x": unknown scheme "nope"`},
	} {
		_, err := r.Lookup(tc.raw)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("Lookup(%q) = %v, want a ConfigError", tc.raw, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Lookup(%q) = %q, want %q", tc.raw, err, tc.want)
		}
	}
	for _, raw := range []string{"dir:x", "dir://x", "fake://h", "fakes://h"} {
		if _, err := r.Lookup(raw); err != nil {
			t.Errorf("Lookup(%q): %v", raw, err)
		}
	}
	if len(opened) != 0 {
		t.Errorf("Lookup opened %v", opened)
	}
}

// A bare path is read as a folder only when this build has the dir
// backend: otherwise it is an unknown scheme like any other.
func TestLookupBarePathWithoutDir(t *testing.T) {
	r := NewRegistry()
	r.Register(Registration{Name: "fake", Schemes: []string{"fake"},
		Factory: NewFactory(parseFake, fakeSourceOpen)})
	_, err := r.Lookup("incident")
	if err == nil || strings.Contains(err.Error(), "dir:") {
		t.Fatalf("Lookup(bare path) without dir = %v", err)
	}
}

func TestOpenScrubsEverySecret(t *testing.T) {
	var opened []string
	r := testRegistry(&opened)
	env := map[string]string{"FAKE_PASSWORD": "envPassw0rd"}
	opts := OpenOptions{Getenv: func(k string) string { return env[k] }, Secret: func(k string) string {
		return map[string]string{"fake_token": "profileT0ken"}[k]
	}}
	// The fake's Open quotes its URL, as client libraries do.
	raw := "fake://user:urlPassw%40rd@h:1?topic=t&token=queryT0ken&note=envPassw0rd,profileT0ken"
	_, err := r.Open(context.Background(), raw, opts)
	if err == nil {
		t.Fatal("Open succeeded")
	}
	for _, secret := range []string{"urlPassw%40rd", "urlPassw@rd", "queryT0ken", "envPassw0rd", "profileT0ken"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Open's error shows %q: %v", secret, err)
		}
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("scrubbing lost the cause: %v", err)
	}
}

func TestOpenRefusals(t *testing.T) {
	var opened []string
	r := testRegistry(&opened)
	ctx := context.Background()

	_, err := r.Open(ctx, "fake://u:pw1234@bad-host", OpenOptions{})
	var ce *ConfigError
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "pw1234") {
		t.Errorf("a URL its backend refuses: %v, want a ConfigError without the password", err)
	}

	_, err = r.Open(ctx, "fake://h", OpenOptions{KeyFrom: "header:tenant"})
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `--key-from "header:tenant": Fake MQ takes no --key-from`) {
		t.Errorf("--key-from on a backend without one: %v", err)
	}

	_, err = r.Open(ctx, "incident", OpenOptions{})
	if !errors.As(err, &ce) {
		t.Errorf("a bare path: %v", err)
	}
	if len(opened) != 0 {
		t.Errorf("a refused source was opened: %v", opened)
	}
}

func TestDisplay(t *testing.T) {
	var opened []string
	r := testRegistry(&opened)
	for raw, want := range map[string]string{
		"fake://u:pw1234@h:1?topic=t": "fake://u:xxxxx@h:1?topic=t",
		"dir:/tmp/q":                  "dir:/tmp/q",
		// Its parser refuses it: redacted all the same.
		"fake://u:pw1234@bad": "fake://u:xxxxx@bad",
		// No backend: redacted all the same.
		"zzz://u:pw1234@h": "zzz://u:xxxxx@h",
	} {
		if got := r.Display(raw); got != want {
			t.Errorf("Display(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestSchemeOf(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://h:1/0":      "redis",
		"dir:incident":       "dir",
		"dir://incident":     "dir",
		"incident":           "incident",
		"https://sqs.x/q":    "https",
		"c:\\path\\to\\file": "c",
	} {
		if got := SchemeOf(raw); got != want {
			t.Errorf("SchemeOf(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestRegisterRefusesDuplicatesAndGaps(t *testing.T) {
	ok := Registration{Name: "a", Schemes: []string{"a"}, Factory: NewFactory(parseFake, fakeSourceOpen)}
	for name, reg := range map[string]Registration{
		"no name":   {Schemes: ok.Schemes, Factory: ok.Factory},
		"no scheme": {Name: "b", Factory: ok.Factory},
		"no parse":  {Name: "b", Schemes: []string{"b"}, Factory: Factory{Open: ok.Open}},
		"no open":   {Name: "b", Schemes: []string{"b"}, Factory: Factory{Parse: ok.Parse}},
		"duplicate": {Name: "b", Schemes: []string{"b", "a"}, Factory: ok.Factory},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			r := NewRegistry()
			r.Register(ok)
			r.Register(reg)
		}()
	}
}

func TestScrub(t *testing.T) {
	base := fmt.Errorf("connect redis://u:hunter22@h: %w", fs.ErrNotExist)
	if got := Scrub(nil, "x"); got != nil {
		t.Errorf("Scrub(nil) = %v", got)
	}
	if got := Scrub(base, "nothere", ""); got != base {
		t.Errorf("no secret in the text: got a new error %v", got)
	}
	// Secrets shorter than 3 characters would blank common letters.
	if got := Scrub(base, "u", "h:"); got != base {
		t.Errorf("short secrets were scrubbed: %v", got)
	}
	got := Scrub(base, "hunter22")
	if got.Error() != "connect redis://u:xxxxx@h: file does not exist" || !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("Scrub = %v (Is ErrNotExist: %v)", got, errors.Is(got, fs.ErrNotExist))
	}
	var ce *ConfigError
	if cfg := Scrub(Configf("bad password hunter22"), "hunter22"); !errors.As(cfg, &ce) || cfg.Error() != "bad password xxxxx" {
		t.Errorf("a scrubbed ConfigError: %v (still one: %v)", cfg, errors.As(cfg, &ce))
	}
}

func TestURLSecrets(t *testing.T) {
	for raw, want := range map[string][]string{
		"redis://u:p%40ss@h:1/0": {"p%40ss", "p@ss"},
		"redis://h:1/0":          nil,
		"kafka://h:9092?topic=t&sasl_password=sp&group=g": {"sp"},
		"sqs://q?access_key=AK&secret_key=SK":             {"AK", "SK"},
		"redis://u:pa:ss@h":                               {"pa:ss"},
		"redis://u@h":                                     nil,
	} {
		got := URLSecrets(raw)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("URLSecrets(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestRedactUserinfo(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://u:p@ss:w@rd@h:1": "redis://xxxxx@h:1",
		"u:pw@h":                  "xxxxx@h",
		"redis://h:1":             "redis://h:1",
		"plain":                   "plain",
	} {
		if got := RedactUserinfo(raw); got != want {
			t.Errorf("RedactUserinfo(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestOpenOptionsZeroValue(t *testing.T) {
	var o OpenOptions
	if o.Env("HOME") != "" || o.ProfileSecret("redis_password") != "" {
		t.Error("a zero OpenOptions read something")
	}
}

func TestBusyError(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	h := LeaseHolder{RunID: "r1", PID: 42, Host: "ops1", Since: since}
	if got, want := h.String(), "run r1 (pid 42 on ops1, since 2026-01-02T02:04:05Z)"; got != want {
		t.Errorf("holder %q, want %q", got, want)
	}
	err := fmt.Errorf("apply: %w", &BusyError{What: "journal j", Holder: h.String()})
	if !errors.Is(err, ErrBusy) || !strings.HasSuffix(err.Error(), "journal j is held by run r1 (pid 42 on ops1, since 2026-01-02T02:04:05Z)") {
		t.Errorf("BusyError: %v (Is ErrBusy: %v)", err, errors.Is(err, ErrBusy))
	}
}

func TestHistogram(t *testing.T) {
	h := NewHistogram()
	for _, d := range []int64{0, 1, 2, 3, 5, 6, 10, 11, 1000} {
		h.Add(d)
	}
	if got, want := h.String(), "1:2 2:1 3-5:2 6-10:2 11+:2"; got != want {
		t.Errorf("histogram %q, want %q", got, want)
	}
	if got := NewHistogram().String(); got != "1:0 2:0 3-5:0 6-10:0 11+:0" {
		t.Errorf("empty histogram %q", got)
	}
}

func TestRefusedDestinationAndGuardUnavailable(t *testing.T) {
	why := errors.New("it is the DLQ itself")
	err := RefusedDestination("redis://h/0?stream=orders-dlq", why)
	if !errors.Is(err, ErrRefusedDestination) || !errors.Is(err, why) || !strings.Contains(err.Error(), "orders-dlq") {
		t.Errorf("RefusedDestination: %v", err)
	}
	cause := errors.New("timeout")
	gu := error(&GuardUnavailable{Err: cause})
	if gu.Error() != "check the destination: timeout" || !errors.Is(gu, cause) || errors.Is(gu, ErrRefusedDestination) {
		t.Errorf("GuardUnavailable: %v", gu)
	}
}
