package inspect

import (
	"math"
	"slices"
	"time"
)

// ageQuantiles gives the nearest-rank percentiles of entry ages (whole
// seconds) in bounded memory. Up to exactAges ages it keeps them all and
// its percentiles are exact; past that it folds them into logarithmic
// buckets whose width is at most 2·ageAccuracy of their value, so a
// percentile is within ageAccuracy (0.1 %) of the exact one. Memory stays
// under a megabyte however large the DLQ: a million entries cost 4 MB as
// a plain list, and percentiles of ages need no more precision than that.
type ageQuantiles struct {
	exact   []uint32
	buckets []uint64 // nil until the exact list is folded
	n       uint64
}

const (
	exactAges = 1 << 17
	// ageAccuracy is the relative error of a percentile past exactAges.
	ageAccuracy = 0.001
	// Ages below linearAges seconds get a bucket each.
	linearAges = 512
)

var logGamma = math.Log((1 + ageAccuracy) / (1 - ageAccuracy))

func bucketOf(v uint32) int {
	if v < linearAges {
		return int(v)
	}
	return linearAges + int(math.Log(float64(v)/linearAges)/logGamma)
}

// bucketValue is the value a bucket stands for: the middle of its range
// (in the relative sense), so that its error is at most ageAccuracy.
func bucketValue(i int) uint32 {
	if i < linearAges {
		return uint32(i)
	}
	k := float64(i - linearAges)
	lo := linearAges * math.Exp(k*logGamma)
	hi := linearAges * math.Exp((k+1)*logGamma)
	return uint32(math.Min(math.Round(2*lo*hi/(lo+hi)), math.MaxUint32))
}

func (q *ageQuantiles) add(age time.Duration) {
	v := uint32(min(max(age/time.Second, 0), math.MaxUint32))
	q.n++
	if q.buckets == nil {
		q.exact = append(q.exact, v)
		if len(q.exact) < exactAges {
			return
		}
		q.buckets = make([]uint64, bucketOf(math.MaxUint32)+1)
		for _, e := range q.exact {
			q.buckets[bucketOf(e)]++
		}
		q.exact = nil
		return
	}
	q.buckets[bucketOf(v)]++
}

// percentile is the nearest-rank p-th percentile, 0 with no ages.
func (q *ageQuantiles) percentile(p int) time.Duration {
	if q.n == 0 {
		return 0
	}
	rank := (uint64(p)*q.n + 99) / 100 // ceil(p/100 · n)
	rank = max(rank, 1)
	if q.buckets == nil {
		sorted := slices.Clone(q.exact)
		slices.Sort(sorted)
		return time.Duration(sorted[rank-1]) * time.Second
	}
	var seen uint64
	for i, c := range q.buckets {
		if seen += c; seen >= rank {
			return time.Duration(bucketValue(i)) * time.Second
		}
	}
	return 0 // not reached: the counts add up to n
}
