package approval

import (
	"errors"
	"fmt"
	"time"
)

// MinHMACKeyBytes: an HMAC-SHA256 key shorter than its 32-byte output is
// weaker than the MAC it makes.
const MinHMACKeyBytes = 32

// minDistinctBytes: a key of 32 bytes drawn from fewer than 8 values (32
// spaces, "aaaa…", "abababab…") is a placeholder, not a secret; `openssl
// rand -hex 32` gives 64 bytes over 16 values.
const minDistinctBytes = 8

// ErrShortKey and ErrWeakKey are wrapped by CheckHMACKey.
var (
	ErrShortKey = errors.New("approval key too short")
	ErrWeakKey  = errors.New("approval key too weak")
)

// CheckHMACKey refuses a missing, short or patterned HMAC approval key.
func CheckHMACKey(key []byte) error {
	if len(key) == 0 {
		return errors.New("no approval key")
	}
	if len(key) < MinHMACKeyBytes {
		return fmt.Errorf("%w: it is %d bytes, at least %d are needed", ErrShortKey, len(key), MinHMACKeyBytes)
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
