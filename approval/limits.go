package approval

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// MinHMACKeyBytes: an HMAC-SHA256 key shorter than its 32-byte output is
// weaker than the MAC it makes.
const MinHMACKeyBytes = 32

// minDistinctBytes: a key of 32 bytes drawn from fewer than 8 values (32
// spaces, "aaaa…", "abababab…") is a placeholder, not a secret; `openssl
// rand -hex 32` gives 64 characters over 16 values.
const minDistinctBytes = 8

// ErrShortKey and ErrWeakKey are wrapped by CheckHMACKey.
var (
	ErrShortKey = errors.New("approval key too short")
	ErrWeakKey  = errors.New("approval key too weak")
)

// KeyBytes is how many bytes of secret a key's text holds: a key written
// in hex digits only (as `openssl rand -hex N` writes N bytes) holds half
// as many bytes as it has characters; any other key, one per byte. The
// MAC itself is keyed with the text as given, so a key in use keeps
// verifying what it signed.
func KeyBytes(key []byte) (n int, hex bool) {
	for _, c := range key {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return len(key), false
		}
	}
	return len(key) / 2, true
}

// CheckHMACKey refuses a missing, short or patterned HMAC approval key.
func CheckHMACKey(key []byte) error {
	if len(key) == 0 {
		return errors.New("no approval key")
	}
	if n, hex := KeyBytes(key); n < MinHMACKeyBytes {
		if hex {
			return fmt.Errorf("%w: its %d hex digits are %d bytes, at least %d are needed", ErrShortKey, len(key), n, MinHMACKeyBytes)
		}
		return fmt.Errorf("%w: it is %d bytes, at least %d are needed", ErrShortKey, n, MinHMACKeyBytes)
	}
	seen := map[byte]bool{}
	for _, c := range key {
		seen[c] = true
	}
	if len(seen) < minDistinctBytes {
		return fmt.Errorf("%w: its %d bytes use only %d distinct values (a placeholder such as spaces or one repeated character, not a random secret)", ErrWeakKey, len(key), len(seen))
	}
	return nil
}

// DefaultMaxTTL bounds how long an approval stays valid unless a policy
// says otherwise: an approval is for an incident, not a standing grant.
const DefaultMaxTTL = 24 * time.Hour

// CheckTTL refuses a lifetime that is not positive or is over max.
func CheckTTL(ttl, max time.Duration) error {
	if ttl <= 0 {
		return errors.New("--ttl must be positive")
	}
	if max > 0 && ttl > max {
		return fmt.Errorf("--ttl %s is over the longest an approval may last, %s (policy.max_approval_ttl)", ttl, max)
	}
	return nil
}

// ClockSkew is how far an approval's time may be ahead of the clock of
// the host that checks it: an approver's clock a little fast is not an
// approval from the future, but one dated later than this is refused,
// since it would pass the "given after the halt" rule of every gate that
// halts before its date.
const ClockSkew = 5 * time.Minute

// FormatTTL writes a lifetime the way --ttl takes it, without the zero
// units time.Duration prints ("24h", not "24h0m0s").
func FormatTTL(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
