package exepages

import (
	"os"
	"regexp"
	"testing"
)

const sampleSmaps = `00400000-00402000 r--p 00000000 fe:00 10027861                           /opt/bin/dl qctl
Size:                  8 kB
Rss:                   8 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
00402000-01be4000 r-xp 00002000 fe:00 10027861                           /opt/bin/dl qctl
Size:              24456 kB
Rss:               23736 kB
Anonymous:             0 kB
FilePmdMapped:     20480 kB
VmFlags: rd ex mr mw me
03432000-03433000 r--p 03031000 fe:00 10027861                           /opt/bin/dl qctl
Size:                  4 kB
Rss:                   4 kB
Anonymous:             4 kB
VmFlags: rd mr mw me ac
03433000-03556000 rw-p 03032000 fe:00 10027861                           /opt/bin/dl qctl
Size:               1164 kB
Rss:                 828 kB
Anonymous:           256 kB
VmFlags: rd wr mr mw me ac
03556000-057d0000 rw-p 00000000 00:00 0
Size:              35304 kB
Rss:                 188 kB
Anonymous:           188 kB
7f0000000000-7f0000200000 r-xs 00000000 fe:00 99                         /opt/bin/dl qctl
Rss:                   8 kB
Anonymous:             0 kB
7f0000200000-7f0000400000 r-xp 00000000 fe:00 42                         /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1324 kB
Anonymous:             0 kB
`

// TestReadOnlyMappings pins which mappings Release may drop: the
// executable's private, read-only ones. Not the writable data, not a shared
// mapping, not another file, and it reports a mapping's written pages so
// that Release leaves a relocated one alone.
func TestReadOnlyMappings(t *testing.T) {
	got := readOnlyMappings([]byte(sampleSmaps), "/opt/bin/dl qctl")
	want := []mapping{
		{start: 0x400000, end: 0x402000, rss: 8 << 10},
		{start: 0x402000, end: 0x1be4000, rss: 23736 << 10},
		{start: 0x3432000, end: 0x3433000, rss: 4 << 10, anonymous: 4 << 10},
	}
	if len(got) != len(want) {
		t.Fatalf("mappings = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestRelease drops this test binary's own text and read-only data and
// keeps running: what it executes afterwards comes back from the page
// cache, and less of the executable is resident than before.
func TestRelease(t *testing.T) {
	before := exeResident(t)
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if released <= 0 {
		t.Fatalf("Release released %d bytes of a running executable", released)
	}
	// Run code the release dropped: the regexp engine and fmt.
	if !regexp.MustCompile(`^a+b$`).MatchString("aaab") {
		t.Fatal("regexp gave a wrong answer after Release")
	}
	after := exeResident(t)
	if after >= before {
		t.Errorf("resident read-only pages of the executable: %d KiB before, %d KiB after Release", before>>10, after>>10)
	}
	t.Logf("read-only pages of the executable: %d KiB before, %d KiB after; released %d KiB", before>>10, after>>10, released>>10)
}

func exeResident(t *testing.T) int64 {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var rss int64
	ms := readOnlyMappings(smaps, exe)
	if len(ms) == 0 {
		t.Fatalf("no read-only mapping of %s in /proc/self/smaps", exe)
	}
	for _, m := range ms {
		rss += m.rss
	}
	return rss
}
