package approval

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Signer is one line of an allowed_signers file (ssh-keygen(1), ALLOWED
// SIGNERS): the principals a key may sign as, and the limits on it.
type Signer struct {
	Line int
	// Principals is the comma-separated pattern list as written: `*` and
	// `?` are wildcards, a leading `!` excludes, as in ssh-keygen.
	Principals string
	Key        ssh.PublicKey
	// Namespaces, when not empty, is the pattern list of namespaces the key
	// may sign in.
	Namespaces  string
	ValidAfter  time.Time
	ValidBefore time.Time
}

// AllowedSigners is a parsed allowed_signers file.
type AllowedSigners struct {
	Path    string
	Signers []Signer
	// CertAuthority lists the lines marked cert-authority: dlqctl does not
	// accept certificates, so these lines let no one approve.
	CertAuthority []int
}

// ReadAllowedSigners reads and parses the file at path.
func ReadAllowedSigners(path string) (*AllowedSigners, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("allowed signers: %w", err)
	}
	a, err := ParseAllowedSigners(bytes.NewReader(b), time.Local)
	if err != nil {
		return nil, fmt.Errorf("allowed signers %s: %w", path, err)
	}
	a.Path = path
	return a, nil
}

// ParseAllowedSigners parses the ssh-keygen format. Times written without
// a trailing Z are in loc, as ssh-keygen reads them in the local zone.
func ParseAllowedSigners(r io.Reader, loc *time.Location) (*AllowedSigners, error) {
	a := &AllowedSigners{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		principals, rest := nextField(line)
		if rest == "" {
			return nil, fmt.Errorf("line %d: a principal list and no key", n)
		}
		key, _, options, _, err := ssh.ParseAuthorizedKey([]byte(rest))
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		s := Signer{Line: n, Principals: unquote(principals), Key: key}
		ca := false
		for _, opt := range options {
			name, val, _ := strings.Cut(opt, "=")
			val = unquote(val)
			switch strings.ToLower(name) {
			case "cert-authority":
				ca = true
			case "namespaces":
				s.Namespaces = val
			case "valid-after":
				if s.ValidAfter, err = parseSignerTime(val, loc); err != nil {
					return nil, fmt.Errorf("line %d: valid-after: %v", n, err)
				}
			case "valid-before":
				if s.ValidBefore, err = parseSignerTime(val, loc); err != nil {
					return nil, fmt.Errorf("line %d: valid-before: %v", n, err)
				}
			default:
				return nil, fmt.Errorf("line %d: unknown option %q (known: cert-authority, namespaces, valid-after, valid-before)", n, name)
			}
		}
		if ca {
			a.CertAuthority = append(a.CertAuthority, n)
			continue
		}
		a.Signers = append(a.Signers, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// nextField splits off the first whitespace-separated field; double quotes
// may hold spaces, as in ssh-keygen.
func nextField(s string) (field, rest string) {
	quoted := false
	for i, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case !quoted && (c == ' ' || c == '\t'):
			return s[:i], strings.TrimSpace(s[i:])
		}
	}
	return s, ""
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// parseSignerTime reads YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z].
func parseSignerTime(s string, loc *time.Location) (time.Time, error) {
	if strings.HasSuffix(s, "Z") || strings.HasSuffix(s, "z") {
		s, loc = s[:len(s)-1], time.UTC
	}
	layouts := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}
	layout, ok := layouts[len(s)]
	if !ok {
		return time.Time{}, fmt.Errorf("%q is not YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]", s)
	}
	return time.ParseInLocation(layout, s, loc)
}

// MatchList reports whether s matches the comma-separated pattern list as
// ssh's match_pattern_list does: `*` and `?` wildcards, and a pattern
// starting with `!` that matches excludes s whatever else matches.
func MatchList(s, list string) bool {
	got := false
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if p == "" || !wildcard(s, p) {
			continue
		}
		if neg {
			return false
		}
		got = true
	}
	return got
}

func wildcard(s, p string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			if p == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if wildcard(s[i:], p) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			s, p = s[1:], p[1:]
		default:
			if s == "" || s[0] != p[0] {
				return false
			}
			s, p = s[1:], p[1:]
		}
	}
	return s == ""
}

// ErrNotAllowed: the key may not sign as the principal.
var ErrNotAllowed = errors.New("not an allowed signer")

// Check says whether key may sign as principal in namespace at time at,
// as `ssh-keygen -Y verify -I principal` decides: some line lists the key
// under a pattern that matches the principal, allows the namespace, and is
// valid at that time. The error names why not (no line for the key, none
// for this principal, another namespace, outside the validity window).
func (a *AllowedSigners) Check(key ssh.PublicKey, principal, namespace string, at time.Time) error {
	want := key.Marshal()
	var why []string
	keyListed := false
	for _, s := range a.Signers {
		if !bytes.Equal(s.Key.Marshal(), want) {
			continue
		}
		keyListed = true
		switch {
		case !MatchList(principal, s.Principals):
			why = append(why, fmt.Sprintf("line %d lists it for %s, not %s", s.Line, s.Principals, principal))
		case s.Namespaces != "" && !MatchList(namespace, s.Namespaces):
			why = append(why, fmt.Sprintf("line %d allows it in namespaces %s only, not %s", s.Line, s.Namespaces, namespace))
		case !s.ValidAfter.IsZero() && at.Before(s.ValidAfter):
			why = append(why, fmt.Sprintf("line %d: not valid before %s", s.Line, s.ValidAfter.UTC().Format(time.RFC3339)))
		case !s.ValidBefore.IsZero() && at.After(s.ValidBefore):
			why = append(why, fmt.Sprintf("line %d: not valid after %s", s.Line, s.ValidBefore.UTC().Format(time.RFC3339)))
		default:
			return nil
		}
	}
	if !keyListed {
		return fmt.Errorf("%w: key %s is not listed in %s", ErrNotAllowed, Fingerprint(key), a.name())
	}
	return fmt.Errorf("%w: key %s in %s: %s", ErrNotAllowed, Fingerprint(key), a.name(), strings.Join(why, "; "))
}

// PrincipalOf is the one principal the key is listed under by name (no
// wildcard), or "" when there is none or more than one: what an approver
// signs as when they do not name themselves.
func (a *AllowedSigners) PrincipalOf(key ssh.PublicKey) string {
	want := key.Marshal()
	found := ""
	for _, s := range a.Signers {
		if !bytes.Equal(s.Key.Marshal(), want) {
			continue
		}
		for _, p := range strings.Split(s.Principals, ",") {
			if p == "" || strings.ContainsAny(p, "*?!") {
				continue
			}
			if found != "" && found != p {
				return ""
			}
			found = p
		}
	}
	return found
}

// Principals lists every principal pattern in the file, once each, in order.
func (a *AllowedSigners) Principals() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range a.Signers {
		for _, p := range strings.Split(s.Principals, ",") {
			if p != "" && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

func (a *AllowedSigners) name() string {
	if a.Path == "" {
		return "allowed signers"
	}
	return a.Path
}
