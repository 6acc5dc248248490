package natsdlq

import (
	"context"
	"fmt"
	"strings"
)

// GuardDestination refuses a subject that the DLQ stream itself takes
// (the redriven message would land straight back in the DLQ), the
// server's and the client's own subject spaces ($JS, $KV — the lease
// bucket lives there —, $SYS, _INBOX), and a subject with wildcards,
// which no publish can name. Anyone who can publish a dead-letter copy
// writes its original-subject header, and so chooses where a redrive
// would send it.
func (s *Stream) GuardDestination(_ context.Context, dest string) error {
	if dest == "" {
		return fmt.Errorf("no destination subject")
	}
	for _, reserved := range []string{"$JS.", "$KV.", "$SYS.", "_INBOX."} {
		if strings.HasPrefix(dest, reserved) {
			return fmt.Errorf("%q is in the server's own subject space (%s…), not a destination", dest, reserved)
		}
	}
	if strings.ContainsAny(dest, "*> \t") {
		return fmt.Errorf("%q is not a subject a message can be published to", dest)
	}
	for _, pattern := range s.dlqSubjects() {
		if subjectMatches(pattern, dest) {
			return fmt.Errorf("%q is taken by this DLQ's own stream %s (subject %s)", dest, s.src.stream, pattern)
		}
	}
	return nil
}

// dlqSubjects are the subjects the DLQ stream takes, as last read.
func (s *Stream) dlqSubjects() []string {
	s.mu.Lock()
	st := s.stream
	s.mu.Unlock()
	if st == nil {
		return CopySubjects(s.src.stream)
	}
	return st.CachedInfo().Config.Subjects
}

// subjectMatches reports whether the literal subject is one the pattern
// takes: "*" stands for one token, a final ">" for one or more.
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) || (p != "*" && p != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}
