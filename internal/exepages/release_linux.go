package exepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Release unmaps the resident pages of the executable's read-only, private
// file mappings (text and read-only data) and marks them MADV_NOHUGEPAGE.
// The pages stay in the page cache and come back on the next access,
// 4 KiB at a time: their content is the file's, so nothing is lost. A
// mapping that holds a single privately written page (relocations applied
// by the dynamic loader, then made read-only) is left alone, since
// dropping it would bring back the file's bytes instead of the written
// ones. It returns how many bytes were released; failures to read
// /proc/self are reported and change nothing.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("exepages: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("exepages: %w", err)
	}
	var released int64
	for _, m := range readOnlyMappings(smaps, exe) {
		if m.anonymous > 0 || m.rss == 0 {
			continue
		}
		size := m.end - m.start
		// MADV_NOHUGEPAGE first, so that no fault between the two calls
		// maps a 2 MiB page again.
		if err := madvise(m.start, size, syscall.MADV_NOHUGEPAGE); err != nil {
			return released, fmt.Errorf("exepages: madvise(MADV_NOHUGEPAGE): %w", err)
		}
		if err := madvise(m.start, size, syscall.MADV_DONTNEED); err != nil {
			return released, fmt.Errorf("exepages: madvise(MADV_DONTNEED): %w", err)
		}
		released += m.rss
	}
	return released, nil
}

func madvise(start, size uintptr, advice int) error {
	// The addresses come from /proc/self/smaps, never from a Go pointer,
	// so the raw system call is the honest form (syscall.Madvise wants a
	// []byte that no Go allocation backs).
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, size, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}

// mapping is one entry of /proc/self/smaps.
type mapping struct {
	start, end uintptr
	// rss and anonymous in bytes: resident, and privately written
	// (copy-on-write) pages.
	rss, anonymous int64
}

// readOnlyMappings lists the private, non-writable mappings of the file
// exe in smaps.
func readOnlyMappings(smaps []byte, exe string) []mapping {
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if f := bytes.Fields(line); len(f) >= 5 && bytes.IndexByte(f[0], '-') > 0 && !bytes.HasSuffix(f[0], []byte(":")) {
			// A mapping header: ADDR-ADDR PERMS OFFSET DEV INODE [PATH].
			cur = nil
			if len(f) < 6 || !bytes.HasSuffix(line, []byte(" "+exe)) || len(f[1]) < 4 || f[1][1] != '-' || f[1][3] != 'p' {
				continue
			}
			lo, hi, ok := bytes.Cut(f[0], []byte("-"))
			start, err1 := strconv.ParseUint(string(lo), 16, 64)
			end, err2 := strconv.ParseUint(string(hi), 16, 64)
			if !ok || err1 != nil || err2 != nil {
				continue
			}
			out = append(out, mapping{start: uintptr(start), end: uintptr(end)})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("Rss:")); ok {
			cur.rss = kib(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("Anonymous:")); ok {
			cur.anonymous = kib(v)
		}
	}
	return out
}

// kib reads "   1234 kB" as bytes. An unreadable value reads as 1 byte:
// as Anonymous that leaves the mapping alone, the safe side.
func kib(v []byte) int64 {
	v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 1
	}
	return n * 1024
}
