package trust

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/approval"
)

// goodKey is 64 hex characters, as `openssl rand -hex 32` gives.
const goodKey = "3f9a1c0b7e6d5a4f8b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a"

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRequiredBy(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{}, ""},
		{Policy{ApprovalsRequired: 1}, ""},
		{Policy{DistinctApprover: true}, ""},
		{Policy{ApprovalsRequired: 2}, "policy.approvals_required"},
		{Policy{SignaturesOnly: true}, "policy.signatures_only"},
		{Policy{RequireApproval: true, SignaturesOnly: true, ApprovalsRequired: 3}, "policy.require_approval"},
		{Policy{SignaturesOnly: true, ApprovalsRequired: 3}, "policy.signatures_only"},
	} {
		if got := RequiredBy(tc.p); got != tc.want {
			t.Errorf("RequiredBy(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name        string
		k           Keys
		p           Policy
		dir, signer string
	}{
		{"nothing", Keys{}, Policy{}, "", ""},
		{"flags win", Keys{KeysDir: "f", EnvKeysDir: "e", AllowedSigners: "fs", EnvAllowedSigners: "es"}, Policy{AllowedSigners: "ps"}, "f", "fs"},
		{"environment next", Keys{EnvKeysDir: "e", EnvAllowedSigners: "es"}, Policy{AllowedSigners: "ps"}, "e", "es"},
		{"policy last", Keys{}, Policy{AllowedSigners: "ps"}, "", "ps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.k.Dir(); got != tc.dir {
				t.Errorf("Dir = %q, want %q", got, tc.dir)
			}
			if got := tc.k.SignersPath(tc.p); got != tc.signer {
				t.Errorf("SignersPath = %q, want %q", got, tc.signer)
			}
		})
	}
}

func TestHMACKey(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "k", "from-file\r\n")
	for _, tc := range []struct {
		name    string
		k       Keys
		want    string
		wantErr string
	}{
		{"none", Keys{}, "", ""},
		{"environment", Keys{EnvKey: "from-env"}, "from-env", ""},
		{"file beats environment, line break dropped", Keys{KeyFile: file, EnvKey: "from-env"}, "from-file", ""},
		{"missing file", Keys{KeyFile: filepath.Join(dir, "absent"), EnvKey: "from-env"}, "", "--key-file: open "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.k.HMACKey()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("HMACKey = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestApproverKey(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "alice.key", goodKey+"\n")
	writeFile(t, dir, "weak.key", strings.Repeat("a", 64))
	for _, tc := range []struct {
		by      string
		want    string
		wantErr string
		is      error
	}{
		{by: "alice", want: goodKey},
		{by: "bob", wantErr: "no key for approver bob in " + dir + " (want bob.key)"},
		{by: "../alice", wantErr: `approver "../alice" cannot name a key file`},
		{by: ".hidden", wantErr: `approver ".hidden" cannot name a key file`},
		{by: "", wantErr: `approver "" cannot name a key file`},
		{by: "weak", wantErr: filepath.Join(dir, "weak.key") + ": approval key too weak", is: approval.ErrWeakKey},
	} {
		t.Run(tc.by, func(t *testing.T) {
			got, err := ApproverKey(dir, tc.by)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Fatalf("err = %v, want it to wrap %v", err, tc.is)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("ApproverKey = %q, %v", got, err)
			}
		})
	}
}

func TestSigningKey(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "alice.key", goodKey)
	file := writeFile(t, t.TempDir(), "one.key", "the-one-key")
	for _, tc := range []struct {
		name    string
		k       Keys
		by      string
		want    string
		wantErr string
	}{
		{"approver's own key from the folder", Keys{KeysDir: dir, EnvKey: "env"}, "alice", goodKey, ""},
		{"folder from the environment", Keys{EnvKeysDir: dir}, "alice", goodKey, ""},
		{"no key for this approver", Keys{KeysDir: dir}, "bob", "", "no key for approver bob"},
		{"--key-file overrides the folder", Keys{KeysDir: dir, KeyFile: file}, "bob", "the-one-key", ""},
		{"one key for everyone", Keys{EnvKey: "env"}, "anyone", "env", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.k.SigningKey(tc.by)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("SigningKey = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		key     string
		wantErr string
		is      error
	}{
		{goodKey, "", nil},
		{"", "no approval key: sign with your SSH key", nil},
		{"short", "approval key too short", approval.ErrShortKey},
		{strings.Repeat(" ", 40), "approval key too weak", approval.ErrWeakKey},
	} {
		err := CheckKey([]byte(tc.key))
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("CheckKey(%q) = %v", tc.key, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.key != "" && !strings.HasSuffix(err.Error(), "(make one with: openssl rand -hex 32)")) {
			t.Errorf("CheckKey(%q) = %v, want %q and how to make a key", tc.key, err, tc.wantErr)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("CheckKey(%q) = %v, want it to wrap %v", tc.key, err, tc.is)
		}
	}
}

func TestApprovalPolicy(t *testing.T) {
	keys := t.TempDir()
	writeFile(t, keys, "alice.key", goodKey)
	notDir := writeFile(t, t.TempDir(), "file", "x")
	keyFile := writeFile(t, t.TempDir(), "k", goodKey+"\n")
	signers := writeFile(t, t.TempDir(), "allowed_signers", "alice ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFuj8QDgGUQxZk6BoRDZMx9JpJjhQ4RmJj5sEFn+3V3g\n")
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))

	for _, tc := range []struct {
		name    string
		s       Settings
		wantErr string
		check   func(t *testing.T, s Settings)
	}{
		{name: "negative approver count", s: Settings{Policy: Policy{ApprovalsRequired: -1}, Config: "config c.yaml"},
			wantErr: "policy.approvals_required is -1 in config c.yaml; it is a count of approvers"},
		{name: "keys folder and key file", s: Settings{Keys: Keys{KeysDir: keys, KeyFile: keyFile}},
			wantErr: "give --key-file or --keys-dir, not both"},
		{name: "keys folder that is a file", s: Settings{Keys: Keys{EnvKeysDir: notDir}},
			wantErr: "keys folder " + notDir + ": not a folder"},
		{name: "weak environment key", s: Settings{Keys: Keys{EnvKey: "short"}},
			wantErr: "approval key too short"},
		{name: "unreadable allowed signers", s: Settings{Policy: Policy{AllowedSigners: filepath.Join(keys, "absent")}},
			wantErr: "absent"},
		{name: "nothing set", s: Settings{Applier: "ops", Now: now, Policy: Policy{ApprovalsRequired: 2, SignaturesOnly: true}},
			check: func(t *testing.T, s Settings) {
				pol, _ := ApprovalPolicy(s)
				if pol.Key != nil || pol.KeyFor != nil || pol.Signers != nil {
					t.Errorf("keys or signers set from nothing: %+v", pol)
				}
				if pol.Required != 2 || !pol.SignaturesOnly || pol.Applier != "ops" || pol.DistinctApprover {
					t.Errorf("policy not carried over: %+v", pol)
				}
				if !pol.Now.Equal(now) || pol.Now.Location() != time.UTC || pol.Now.Nanosecond() != 600 {
					t.Errorf("Now = %v, want %v in UTC with its fraction", pol.Now, now)
				}
			}},
		{name: "distinct from the flag or the policy", s: Settings{Distinct: true},
			check: func(t *testing.T, s Settings) {
				for _, s := range []Settings{s, {Policy: Policy{DistinctApprover: true}}} {
					if pol, _ := ApprovalPolicy(s); !pol.DistinctApprover {
						t.Errorf("%+v: not distinct", s)
					}
				}
			}},
		{name: "one key", s: Settings{Keys: Keys{KeyFile: keyFile, EnvKey: "ignored"}},
			check: func(t *testing.T, s Settings) {
				pol, _ := ApprovalPolicy(s)
				if string(pol.Key) != goodKey || pol.KeyFor != nil {
					t.Errorf("Key = %q, KeyFor set: %v", pol.Key, pol.KeyFor != nil)
				}
			}},
		{name: "a key per approver", s: Settings{Keys: Keys{KeysDir: keys, EnvKey: goodKey}},
			check: func(t *testing.T, s Settings) {
				pol, _ := ApprovalPolicy(s)
				if pol.Key != nil || pol.KeyFor == nil {
					t.Fatalf("want KeyFor only: %+v", pol)
				}
				if k, err := pol.KeyOf("alice"); err != nil || string(k) != goodKey {
					t.Errorf("KeyOf(alice) = %q, %v", k, err)
				}
				if _, err := pol.KeyOf("mallory"); err == nil {
					t.Error("KeyOf(mallory) found a key")
				}
			}},
		{name: "allowed signers", s: Settings{Keys: Keys{EnvAllowedSigners: signers}},
			check: func(t *testing.T, s Settings) {
				pol, _ := ApprovalPolicy(s)
				if pol.Signers == nil || len(pol.Signers.Signers) != 1 {
					t.Errorf("Signers = %+v", pol.Signers)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ApprovalPolicy(tc.s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, tc.s)
		})
	}
}

func TestHowGoingOn(t *testing.T) {
	strict := Policy{RequireApproval: true}
	for _, tc := range []struct {
		name      string
		p         Policy
		approvals int
		halted    bool
		signed    bool
		want      GoingOn
	}{
		{"approved run", Policy{}, 1, false, true, UnderApprovals},
		{"approved run, unsigned journal", Policy{}, 2, false, false, UnderApprovals},
		{"halted one-step run", Policy{}, 0, true, false, UnderApprovals},
		{"halted one-step run under a strict policy", strict, 0, true, true, UnderApprovals},
		{"one-step run, policy now requires approval", strict, 0, false, true, Refused},
		{"one-step run, policy now asks for two approvers", Policy{ApprovalsRequired: 2}, 0, false, false, Refused},
		{"one-step run, policy now takes signatures only", Policy{SignaturesOnly: true}, 0, false, true, Refused},
		{"unsigned one-step run", Policy{}, 0, false, false, AskYes},
		{"signed one-step run", Policy{DistinctApprover: true}, 0, false, true, AsStarted},
	} {
		if got := HowGoingOn(tc.p, tc.approvals, tc.halted, tc.signed); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMaxTTL(t *testing.T) {
	if got := MaxTTL(Policy{}); got != approval.DefaultMaxTTL {
		t.Errorf("no cap: %s, want the default %s", got, approval.DefaultMaxTTL)
	}
	if got := MaxTTL(Policy{MaxApprovalTTL: time.Hour}); got != time.Hour {
		t.Errorf("a cap of 1h: %s", got)
	}
}

func TestPlannerMayApprove(t *testing.T) {
	for _, tc := range []struct {
		p        Policy
		distinct bool
		want     bool
	}{
		{Policy{}, false, true},
		{Policy{}, true, false},
		{Policy{DistinctApprover: true}, false, false},
		{Policy{DistinctApprover: true}, true, false},
	} {
		if got := PlannerMayApprove(tc.p, tc.distinct); got != tc.want {
			t.Errorf("PlannerMayApprove(%+v, %v) = %v", tc.p, tc.distinct, got)
		}
	}
}
