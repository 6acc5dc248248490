package redrive

import (
	"strings"
	"testing"
)

// HasFingerprint answers exactly what comparing Fingerprint(i) would, for
// fingerprints kept as 32 bytes and as text alike.
func TestEntriesIDAndHasFingerprint(t *testing.T) {
	raw := "sha256:" + strings.Repeat("0f", 16) + strings.Repeat("a9", 16)
	es := NewEntries(
		Entry{Seq: 1, ID: "1-1", EventID: "E1", Key: "k", Fingerprint: raw},
		Entry{Seq: 2, ID: "1-2", EventID: "E2", Fingerprint: "SHA256:NotHex"},
		Entry{Seq: 3, ID: "1-3", EventID: "E3"},
		Entry{Seq: 4, ID: "1-4", EventID: "E4", Fingerprint: "sha256:" + strings.Repeat("b", 64)},
	)
	asked := []string{
		raw, strings.ToUpper(raw), "sha256:" + strings.Repeat("0f", 16) + strings.Repeat("a9", 15) + "a8",
		raw[:len(raw)-1], raw + "0", "md5:" + raw[len("sha256:"):], "SHA256:NotHex", "sha256:NotHex", "",
		"sha256:" + strings.Repeat("b", 64), "sha256:" + strings.Repeat("B", 64),
	}
	for i := range es.Len() {
		e := es.At(i)
		if es.ID(i) != e.ID {
			t.Errorf("ID(%d) = %q, want %q", i, es.ID(i), e.ID)
		}
		for _, fp := range asked {
			if got, want := es.HasFingerprint(i, fp), es.Fingerprint(i) == fp; got != want {
				t.Errorf("entry %d (fingerprint %q): HasFingerprint(%q) = %v, want %v", i, es.Fingerprint(i), fp, got, want)
			}
		}
	}
}
