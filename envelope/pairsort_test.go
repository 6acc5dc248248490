package envelope

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkSortPairs sorts a copy of pairs with sortPairs and with the
// comparison sort, and fails unless both give the same order.
func checkSortPairs(t *testing.T, pairs []eventPair) {
	t.Helper()
	got := slices.Clone(pairs)
	sortPairs(got, make([]eventPair, len(got)))
	want := slices.Clone(pairs)
	slices.SortFunc(want, lessPair)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%d pairs: at %d got %+v, want %+v", len(pairs), i, got[i], want[i])
		}
	}
}

// TestSortPairsMatchesSortFunc: on pairs whose words vary in every byte,
// in few bytes (passes skipped), or repeat (equal keys), the radix sort
// gives the comparison sort's order, at sizes on both sides of where it
// falls back to that sort.
func TestSortPairsMatchesSortFunc(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := map[string]func() eventPair{
		"random": func() eventPair { return eventPair{rng.Uint32(), rng.Uint32(), rng.Uint32()} },
		"one event, many fingerprints": func() eventPair {
			return eventPair{7, 9, rng.Uint32N(1000)}
		},
		"low bytes only": func() eventPair {
			return eventPair{rng.Uint32N(4), rng.Uint32N(300), rng.Uint32N(2)}
		},
		"repeats": func() eventPair {
			k := rng.Uint32N(50)
			return eventPair{k, k * 3, k % 2}
		},
		"all equal": func() eventPair { return eventPair{1, 2, 3} },
	}
	for name, gen := range shapes {
		for _, n := range []int{0, 1, 255, 256, 1000, trackerChunk} {
			pairs := make([]eventPair, n)
			for i := range pairs {
				pairs[i] = gen()
			}
			t.Run(name, func(t *testing.T) { checkSortPairs(t, pairs) })
		}
	}
}

// FuzzSortPairs holds the radix sort to the comparison sort on any
// pairs: each 12 bytes of the input are one pair, repeated to reach the
// radix path.
func FuzzSortPairs(f *testing.F) {
	f.Add([]byte("0123456789ab0123456789abzzzzzzzzzzzz"))
	f.Add(make([]byte, 12*3))
	f.Fuzz(func(t *testing.T, b []byte) {
		var base []eventPair
		for ; len(b) >= 12; b = b[12:] {
			base = append(base, eventPair{binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])})
		}
		if len(base) == 0 {
			return
		}
		pairs := make([]eventPair, 0, 300)
		for i := 0; len(pairs) < 300; i++ {
			p := base[i%len(base)]
			p.fp ^= uint32(i % 3) // a few fingerprints per event
			pairs = append(pairs, p)
		}
		checkSortPairs(t, pairs)
	})
}
