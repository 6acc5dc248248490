//go:build !unix

package envelope

// arena is the Go heap where anonymous mappings are not at hand.
type arena struct{}

func (*arena) chunk(n int) []eventPair { return make([]eventPair, 0, n) }

func (*arena) free() {}
