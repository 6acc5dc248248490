package envelope

import (
	"strings"
	"testing"
)

func TestComputeFingerprint(t *testing.T) {
	cases := []struct {
		payload []byte
		want    string
	}{
		{[]byte("test"), "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
		{[]byte{}, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{nil, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{[]byte(`{"orderId":"order-123","amount":1200}`), specPayloadFingerprint},
	}
	for _, c := range cases {
		if got := ComputeFingerprint(c.payload); got != c.want {
			t.Errorf("ComputeFingerprint(%q) = %s, want %s", c.payload, got, c.want)
		}
	}
}

func TestFillFingerprint(t *testing.T) {
	e := Envelope{Payload: []byte("test")}
	e.FillFingerprint()
	if e.Fingerprint != "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" || !e.FingerprintComputed {
		t.Errorf("FillFingerprint: %q computed=%v", e.Fingerprint, e.FingerprintComputed)
	}
	carried := Envelope{Payload: []byte("test"), Fingerprint: "md5:098f6bcd4621d373cade4e832627b4f6"}
	carried.FillFingerprint()
	if carried.Fingerprint != "md5:098f6bcd4621d373cade4e832627b4f6" || carried.FingerprintComputed {
		t.Errorf("FillFingerprint replaced a carried fingerprint: %q computed=%v", carried.Fingerprint, carried.FingerprintComputed)
	}
}

func TestVerifyFingerprint(t *testing.T) {
	const testHex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	cases := []struct {
		name string
		e    Envelope
		want string
	}{
		{"match", Envelope{Payload: []byte("test"), Fingerprint: "sha256:" + testHex}, FingerprintMatch},
		{"upper-case hex", Envelope{Payload: []byte("test"), Fingerprint: "sha256:" + strings.ToUpper(testHex)}, FingerprintMatch},
		{"upper-case prefix", Envelope{Payload: []byte("test"), Fingerprint: "SHA256:" + testHex}, FingerprintMatch},
		{"mismatch", Envelope{Payload: []byte("test2"), Fingerprint: "sha256:" + testHex}, FingerprintMismatch},
		{"mismatch truncated", Envelope{Payload: []byte("test"), Fingerprint: "sha256:" + testHex[:10]}, FingerprintMismatch},
		{"mismatch empty hex", Envelope{Payload: []byte("test"), Fingerprint: "sha256:"}, FingerprintMismatch},
		{"md5", Envelope{Payload: []byte("test"), Fingerprint: "md5:098f6bcd4621d373cade4e832627b4f6"}, FingerprintUnverifiable},
		{"bare hex", Envelope{Payload: []byte("test"), Fingerprint: testHex}, FingerprintUnverifiable},
		{"sha1", Envelope{Payload: []byte("test"), Fingerprint: "sha1:a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"}, FingerprintUnverifiable},
		{"computed", func() Envelope { e := Envelope{Payload: []byte("x")}; e.FillFingerprint(); return e }(), FingerprintComputed},
	}
	for _, c := range cases {
		if got := c.e.VerifyFingerprint(); got != c.want {
			t.Errorf("%s: VerifyFingerprint = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestCarriedFingerprint(t *testing.T) {
	computed := Envelope{Payload: []byte("x")}
	computed.FillFingerprint()
	if got := computed.CarriedFingerprint(); got != "" {
		t.Errorf("CarriedFingerprint of a computed one = %q, want empty", got)
	}
	carried := DecodeFile("f", fileWith(map[string]string{"fingerprint": `"md5:abc"`}))
	if got := carried.CarriedFingerprint(); got != "md5:abc" {
		t.Errorf("CarriedFingerprint = %q, want md5:abc", got)
	}
	none := DecodeFile("f", fileWith(nil))
	if none.Fingerprint == "" || none.CarriedFingerprint() != "" || none.VerifyFingerprint() != FingerprintComputed {
		t.Errorf("no fingerprint in file: %q carried %q verify %q", none.Fingerprint, none.CarriedFingerprint(), none.VerifyFingerprint())
	}
}
