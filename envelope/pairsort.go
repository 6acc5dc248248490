package envelope

import "slices"

// sortPairs sorts c in lessPair's order with tmp (len(tmp) ≥ len(c)) as
// scratch: a least-significant-digit radix sort, one byte of the 96-bit
// key per pass. A tracker sorts every 65,536 pairs it takes: comparison
// sorting them was 6.5 % of a million-entry Kafka `stats`' CPU, and the
// radix sort takes under a third of the time (2.7 ms against 9.3 ms for
// 65,536 random pairs). TestSortPairsMatchesSortFunc and FuzzSortPairs
// hold it to the comparison sort.
func sortPairs(c, tmp []eventPair) {
	n := len(c)
	if n < 256 || len(tmp) < n {
		slices.SortFunc(c, lessPair)
		return
	}
	// One counting pass for all twelve digits: digit d is byte d%4 of the
	// word d/4, the words from least significant: fp, eventLo, eventHi.
	var counts [12][256]int
	for _, p := range c {
		for b := range 4 {
			s := 8 * b
			counts[b][byte(p.fp>>s)]++
			counts[4+b][byte(p.eventLo>>s)]++
			counts[8+b][byte(p.eventHi>>s)]++
		}
	}
	src, dst := c, tmp[:n]
	for d := range counts {
		cnt := &counts[d]
		word, shift := d/4, 8*(d%4)
		if cnt[pairDigit(src[0], word, shift)] == n {
			continue // every pair has this digit: the pass would change nothing
		}
		sum := 0
		for i, k := range cnt {
			cnt[i] = sum
			sum += k
		}
		for _, p := range src {
			x := pairDigit(p, word, shift)
			dst[cnt[x]] = p
			cnt[x]++
		}
		src, dst = dst, src
	}
	if &src[0] != &c[0] {
		copy(c, src)
	}
}

// pairDigit is the byte at shift of p's word (0: fp, 1: eventLo, 2: eventHi).
func pairDigit(p eventPair, word, shift int) byte {
	switch word {
	case 0:
		return byte(p.fp >> shift)
	case 1:
		return byte(p.eventLo >> shift)
	}
	return byte(p.eventHi >> shift)
}
