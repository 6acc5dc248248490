package backend

import (
	"strings"
	"testing"
)

// RedactURL never lets a password through, wherever in the URL it sits.
func TestRedactURL(t *testing.T) {
	const pw = "S3cretPW"
	for _, raw := range []string{
		"redis://u:" + pw + "@127.0.0.1:6379/0?stream=a",
		"redis://#:" + pw + "@127.0.0.1:1/0?0",                     // a stray "#" makes the rest a fragment
		"pulsar://h:6650?topic=t&admin=http://u:" + pw + "@h:8080", // userinfo inside a query value
		"redis://u:" + pw + "@[bad",                                // does not parse
		"kafka://h:9092?topic=t&sasl_password=" + pw,
	} {
		if got := RedactURL(raw); strings.Contains(got, pw) {
			t.Errorf("RedactURL(%q) = %q: the password shows", raw, got)
		}
	}
	if got, want := RedactURL("redis://u:"+pw+"@h:6379/0?stream=a"), "redis://u:xxxxx@h:6379/0?stream=a"; got != want {
		t.Errorf("RedactURL kept too little or too much: %q, want %q", got, want)
	}
}
