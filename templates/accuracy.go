package templates

// GroupingAccuracy is the share of messages grouped right: a message is
// right when the group it was put in holds exactly the messages that share
// its true template (the measure of the log-parsing benchmarks, Zhu et al.,
// ICSE-SEIP 2019). truth and got give, per message, its true template and
// the group it was put in.
func GroupingAccuracy(truth, got []string) float64 {
	if len(truth) == 0 {
		return 1
	}
	type pair struct{ t, g string }
	byTruth, byGot, byPair := map[string]int{}, map[string]int{}, map[pair]int{}
	for i := range truth {
		byTruth[truth[i]]++
		byGot[got[i]]++
		byPair[pair{truth[i], got[i]}]++
	}
	right := 0
	for p, n := range byPair {
		if byTruth[p.t] == n && byGot[p.g] == n {
			right += n
		}
	}
	return float64(right) / float64(len(truth))
}
