package cmd

import (
	"encoding/base64"
	"fmt"
	"sort"
)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func sortStable(keys []string, less func(a, b string) bool) {
	sort.SliceStable(keys, func(i, j int) bool { return less(keys[i], keys[j]) })
}

func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
