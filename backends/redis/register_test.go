package redisstream

import "testing"

// TestGroupsSource: pending reads the groups of --stream on the server the
// source names; a source without a stream gets that one, and one that
// names its DLQ stream keeps it.
func TestGroupsSource(t *testing.T) {
	for _, c := range []struct{ source, want string }{
		{"redis://h:6379/0", "redis://h:6379/0?stream=orders"},
		{"rediss://u:p@h:6379/2?tls_insecure=true", "rediss://u:p@h:6379/2?stream=orders&tls_insecure=true"},
		{"redis://h:6379/0?stream=orders-dlq", "redis://h:6379/0?stream=orders-dlq"},
	} {
		if got := Registration().GroupsSource(c.source, "orders"); got != c.want {
			t.Errorf("%s: %s, want %s", c.source, got, c.want)
		}
	}
}
