package report

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report/ -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s\n--- got:\n%s\n--- want:\n%s\n--- got (quoted): %q", path, got, want, got)
	}
}

var now = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// ansi makes the renderer draw in 16 colours into a buffer, as it would on a
// terminal.
func ansi() *colorprofile.Profile {
	p := colorprofile.ANSI
	return &p
}

func sampleTable() Table {
	return Table{
		Title: "Dead letters",
		Columns: []Column{
			{Name: "id"},
			{Name: "attempts", Right: true},
			{Name: "age", Right: true},
			{Name: "dead_lettered_at"},
			{Name: "error", MaxWidth: 24},
			{Name: "retryable"},
			{Name: "owner"},
		},
		Rows: [][]any{
			{"1714564500000-0", 3, Age(3*time.Hour + 4*time.Minute), now.Add(-5 * time.Minute), "timeout calling payments", true, nil},
			{"1714564800000-0", int64(12), Age(45 * time.Second), now.Add(-2*24*time.Hour - 5*time.Hour), "tab\there and\nnewline | pipe, then a very long tail", false, "billing"},
		},
	}
}

func render(t *testing.T, tb Table, o Options) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTable(&buf, tb, o); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestWriteTableTTYColour(t *testing.T) {
	out := render(t, sampleTable(), Options{TTY: true, Width: 120, Now: now, profile: ansi()})
	golden(t, "table_tty_colour", out)
	if !strings.Contains(out, "\x1b[1m") {
		t.Errorf("header is not bold on a colour terminal:\n%q", out)
	}
	for _, want := range []string{"5m ago", "2d5h ago", "3h4m", "45s", "Dead letters"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteTableTTYNoColor(t *testing.T) {
	// The renderer is told the terminal has colours; NoColor must still win.
	out := render(t, sampleTable(), Options{TTY: true, NoColor: true, Width: 120, Now: now, profile: ansi()})
	golden(t, "table_tty_nocolor", out)
	if strings.Contains(out, "\x1b[") {
		t.Errorf("NoColor output has ANSI escapes:\n%q", out)
	}
	if !strings.Contains(out, "╭") {
		t.Errorf("NoColor output lost its lipgloss border:\n%s", out)
	}
	// ATTEMPTS is right-aligned: the number touches the cell's right padding.
	if !strings.Contains(out, "│        3 │") || !strings.Contains(out, "│       12 │") {
		t.Errorf("attempts column is not right-aligned:\n%s", out)
	}
}

// TestWriteTableTTYNarrowTerminal: a table whose free text would be cut to
// a few characters is drawn as one block per row, every value whole or
// word-wrapped, every line inside the terminal.
func TestWriteTableTTYNarrowTerminal(t *testing.T) {
	for _, tc := range []struct {
		width int
		want  []string
	}{
		{72, []string{"ATTEMPTS          12", "AGE               45s", "DEAD_LETTERED_AT  2d5h ago", "ERROR             tab here and newline | pipe, then a very long tail"}},
		{50, []string{"ATTEMPTS          12", "ERROR             tab here and newline | pipe,\n                  then a very long tail"}},
	} {
		t.Run(fmt.Sprint(tc.width), func(t *testing.T) {
			out := render(t, sampleTable(), Options{TTY: true, NoColor: true, Width: tc.width, Now: now})
			golden(t, fmt.Sprintf("table_tty_width%d", tc.width), out)
			for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if w := lipgloss.Width(line); w > tc.width {
					t.Errorf("line is %d columns wide on a %d-column terminal: %q", w, tc.width, line)
				}
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("narrow table lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "…") || strings.Contains(out, "│") {
				t.Errorf("the block layout cut a value or drew a border:\n%s", out)
			}
		})
	}
}

// TestWriteTableVerticalKeepsLongKeysWhole: a key value wider than the
// room beside its name goes whole on a line of its own.
func TestWriteTableVerticalKeepsLongKeysWhole(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4) + "beef"
	tb := Table{Columns: []Column{{Name: "id", Kind: Key}, {Name: "digest", Kind: Key}, {Name: "error"}},
		Rows: [][]any{{"a-1", digest, strings.Repeat("word ", 40)}}}
	out := render(t, tb, Options{TTY: true, NoColor: true, Width: 80, Now: now})
	if !strings.Contains(out, "\n"+digest+"\n") {
		t.Errorf("the digest is not whole on a line of its own:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("line is %d columns wide: %q", w, line)
		}
	}
}

// TestWriteTableWideIsBorderless: -o wide on a terminal draws no border,
// so that `less -S` pages it, and cuts nothing.
func TestWriteTableWideIsBorderless(t *testing.T) {
	out := render(t, keyTable(), Options{Format: FormatWide, TTY: true, NoColor: true, Width: 80, Now: now})
	if strings.ContainsAny(out, "│╭─") {
		t.Errorf("-o wide drew a border:\n%s", out)
	}
	if !strings.Contains(out, "ID                      EVENT ID") || !strings.Contains(out, "fraud check rejected order order-99819 (score 0.97)") {
		t.Errorf("-o wide is not aligned columns of whole values:\n%s", out)
	}
}

func TestNoColorForcesAsciiProfile(t *testing.T) {
	var buf bytes.Buffer
	if p := (Options{NoColor: true, profile: ansi()}).renderer(&buf).profile; p != colorprofile.NoTTY {
		t.Errorf("NoColor renderer profile = %v, want NoTTY", p)
	}
	if p := (Options{profile: ansi()}).renderer(&buf).profile; p != colorprofile.ANSI {
		t.Errorf("colour renderer profile = %v, want ANSI", p)
	}
}

func TestWriteTablePiped(t *testing.T) {
	out := render(t, sampleTable(), Options{Width: 120, Now: now, profile: ansi()})
	golden(t, "table_piped", out)
	if strings.Contains(out, "\x1b") {
		t.Errorf("piped output has escapes:\n%q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header and 2 rows, got %d lines:\n%s", len(lines), out)
	}
	if lines[0] != "ID\tATTEMPTS\tAGE\tDEAD_LETTERED_AT\tERROR\tRETRYABLE\tOWNER" {
		t.Errorf("header row = %q", lines[0])
	}
	for i, line := range lines {
		if n := strings.Count(line, "\t"); n != 6 {
			t.Errorf("line %d has %d tabs, want 6: %q", i, n, line)
		}
	}
	first := strings.Split(lines[1], "\t")
	if first[2] != "11040" || first[3] != "2024-05-01T11:55:00Z" {
		t.Errorf("age/time = %q, %q; want whole seconds and RFC 3339 UTC", first[2], first[3])
	}
	if strings.Contains(out, "Dead letters") {
		t.Errorf("title must not precede the header row when piped:\n%s", out)
	}
}

func TestWriteTableMarkdown(t *testing.T) {
	out := render(t, sampleTable(), Options{Format: FormatMarkdown, TTY: true, Now: now, profile: ansi()})
	golden(t, "table_markdown", out)
	if !strings.HasPrefix(out, "### Dead letters\n\n| id | attempts |") {
		t.Errorf("markdown does not start with title and header:\n%s", out)
	}
	if !strings.Contains(out, "\n|---|---|---|---|---|---|---|\n") {
		t.Errorf("markdown separator missing:\n%s", out)
	}
	if !strings.Contains(out, `newline \| pipe, then a very long tail |`) {
		t.Errorf("| in a cell is not escaped:\n%s", out)
	}
	if !strings.Contains(out, "| 2024-05-01T11:55:00Z |") || !strings.Contains(out, "| 3h4m |") {
		t.Errorf("markdown times/ages:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("markdown has escapes:\n%q", out)
	}
}

// binary is what a payload column may hold: NUL, an escape sequence that would
// repaint the terminal, and bytes that are not UTF-8.
const binary = "\x00\x1b[31mred\x1b[0m\xff\xfe\x07end"

func TestTruncate(t *testing.T) {
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"fits", "hello", 5, "hello"},
		{"cut", "hello world", 8, "hello w…"},
		{"one column", "hello", 1, "…"},
		{"no limit", "a\tb\nc", 0, "a b c"},
		{"wide runes", "日本語テキスト", 5, "日本…"},
		{"wide rune at edge", "ab日本", 4, "ab…"},
		{"binary", binary, 0, "  [31mred [0m\uFFFD\uFFFD end"},
		{"binary cut", binary, 8, "  [31mr…"},
		{"bidi override", "a\u202eb", 0, "a b"},
		{"real U+FFFD kept", "\uFFFD", 1, "\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if tt.max > 0 && lipgloss.Width(got) > tt.max {
				t.Errorf("Truncate(%q, %d) is %d columns wide", tt.in, tt.max, lipgloss.Width(got))
			}
		})
	}
}

func TestTruncateHuge(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	if got := Truncate(huge, 60); got != strings.Repeat("x", 59)+"…" {
		t.Errorf("1 MiB string cut to %d bytes: %q...", len(got), got[:min(len(got), 80)])
	}
	marks := "a" + strings.Repeat("\u0301", 1<<16)
	if got := Truncate(marks, 10); utf8.RuneCountInString(got) > 4*10+1 {
		t.Errorf("a run of combining marks was not capped: %d runes", utf8.RuneCountInString(got))
	}
}

func truncationTable() Table {
	return Table{
		Columns: []Column{{Name: "kind"}, {Name: "payload", MaxWidth: 16}},
		Rows: [][]any{
			{"long", strings.Repeat("0123456789", 1<<16)},
			{"binary", []byte(binary)},
		},
	}
}

func TestWriteTableTruncation(t *testing.T) {
	tty := render(t, truncationTable(), Options{TTY: true, NoColor: true, Now: now})
	golden(t, "table_truncation_tty", tty)
	piped := render(t, truncationTable(), Options{Now: now})
	md := render(t, truncationTable(), Options{Format: FormatMarkdown, Now: now})
	wide := render(t, truncationTable(), Options{Format: FormatWide, TTY: true, NoColor: true, Now: now})
	for name, out := range map[string]string{"tty": tty, "piped": piped, "markdown": md, "wide": wide} {
		if strings.ContainsAny(out, "\x00\x1b\x07") || !utf8.ValidString(out) {
			t.Errorf("%s: control bytes or invalid UTF-8 reached the output: %q", name, out[:min(len(out), 200)])
		}
	}
	if len(tty) > 2000 || !strings.Contains(tty, "0123456789012345"[:15]+"…") {
		t.Errorf("tty: long cell not cut to 16 columns with an ellipsis:\n%s", tty)
	}
	// Piped, markdown and wide output never cut: the whole 640 KiB cell is there.
	full := strings.Repeat("0123456789", 1<<16)
	for name, out := range map[string]string{"piped": piped, "markdown": md, "wide": wide} {
		if !strings.Contains(out, full) || strings.Contains(out, "…") {
			t.Errorf("%s: a long cell was cut (%d bytes)", name, len(out))
		}
	}
}

// keyTable has what people copy (ids, categories) next to free text.
func keyTable() Table {
	return Table{Columns: []Column{
		{Name: "id", Kind: Key}, {Name: "event id", Kind: Key}, {Name: "age", Right: true},
		{Name: "attempts", Right: true, Optional: true}, {Name: "category", Kind: Key, Tone: DispositionTone},
		{Name: "origin", Optional: true}, {Name: "error"},
	}, Rows: [][]any{
		{"20261129T080820Z-0002", "evt-7ab4c1b91885", Age(2 * time.Hour), 2, "missing-reference", "shipping", "referenced customer purged by GDPR job"},
		{"20261129T081352Z-0003", "evt-441aced0e699", Unknown{}, 4, "redrive", "orders", "fraud check rejected order order-99819 (score 0.97)"},
	}}
}

func TestWriteTableNeverCutsKeys(t *testing.T) {
	for _, width := range []int{80, 60} {
		out := render(t, keyTable(), Options{TTY: true, NoColor: true, Width: width, Now: now})
		for _, want := range []string{"20261129T080820Z-0002", "evt-441aced0e699", "missing-reference", "EVENT ID"} {
			if !strings.Contains(out, want) {
				t.Errorf("width %d: %q was cut:\n%s", width, want, out)
			}
		}
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if w := lipgloss.Width(line); w > width {
				t.Errorf("line is %d columns wide on a %d-column terminal: %q", w, width, line)
			}
		}
		// Too narrow for a usable error column: one block per row, the
		// error whole.
		if !strings.Contains(out, "ERROR     referenced customer purged by GDPR job") || !strings.Contains(out, "AGE       —") {
			t.Errorf("width %d: the error is not whole in a block per row:\n%s", width, out)
		}
	}
	// Dropping the optional columns leaves the error room enough: a table.
	out := render(t, keyTable(), Options{TTY: true, NoColor: true, Width: 99, Now: now})
	if strings.Contains(out, "ORIGIN") || !strings.Contains(out, "│ referenced customer purge…") {
		t.Errorf("width 99: optional columns were not dropped to give the error room:\n%s", out)
	}
	wideOut := render(t, keyTable(), Options{Format: FormatWide, TTY: true, NoColor: true, Width: 80, Now: now})
	if !strings.Contains(wideOut, "ORIGIN") || !strings.Contains(wideOut, "(score 0.97)") {
		t.Errorf("-o wide dropped or cut something:\n%s", wideOut)
	}
	roomy := render(t, keyTable(), Options{TTY: true, NoColor: true, Width: 200, Now: now})
	if !strings.Contains(roomy, "ORIGIN") || !strings.Contains(roomy, "ATTEMPTS") {
		t.Errorf("a 200-column terminal lost columns:\n%s", roomy)
	}
}

func TestWriteTableTone(t *testing.T) {
	out := render(t, keyTable(), Options{TTY: true, Width: 200, Now: now, profile: ansi()})
	if !strings.Contains(out, "\x1b[32m") {
		t.Errorf("redrive disposition is not green:\n%q", out)
	}
	out = render(t, keyTable(), Options{TTY: true, NoColor: true, Width: 200, Now: now, profile: ansi()})
	if strings.Contains(out, "\x1b[") {
		t.Errorf("NoColor table has escapes:\n%q", out)
	}
}

func TestWriteTableRefusesJSONAndLongRows(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleTable(), Options{Format: FormatJSON}); err == nil {
		t.Error("WriteTable accepted the json format")
	}
	bad := Table{Columns: []Column{{Name: "a"}}, Rows: [][]any{{"x", "y"}}}
	if err := WriteTable(&buf, bad, Options{}); err == nil {
		t.Error("a row longer than the columns was accepted")
	}
	if buf.Len() != 0 {
		t.Errorf("refused tables wrote %q", buf.String())
	}
}

func TestWriteJSON(t *testing.T) {
	doc := map[string]any{"schema": "dlqctl.test/v1", "error": "<a> & <b>", "n": 1}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, doc); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"error\": \"<a> & <b>\",\n  \"n\": 1,\n  \"schema\": \"dlqctl.test/v1\"\n}\n"
	if buf.String() != want {
		t.Errorf("WriteJSON = %q, want %q", buf.String(), want)
	}
	buf.Reset()
	if err := WriteNDJSON(&buf, doc); err != nil {
		t.Fatal(err)
	}
	if want := `{"error":"<a> & <b>","n":1,"schema":"dlqctl.test/v1"}` + "\n"; buf.String() != want {
		t.Errorf("WriteNDJSON = %q, want %q", buf.String(), want)
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats() {
		got, err := ParseFormat(string(f))
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	_, err := ParseFormat("x")
	if err == nil || err.Error() != `unknown output format "x" (allowed: table, wide, json, ndjson, markdown, openmetrics)` {
		t.Errorf("ParseFormat(x) error = %v", err)
	}
	var ufe *UnknownFormatError
	if !errors.As(err, &ufe) || ufe.Value != "x" {
		t.Errorf("error is not an *UnknownFormatError: %#v", err)
	}
	if _, err := ParseFormat("JSON"); err == nil {
		t.Error("formats are case-sensitive, as the flag documents them")
	}
}

func TestFormatAge(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{999 * time.Millisecond, "0s"},
		{45 * time.Second, "45s"},
		{12*time.Minute + 59*time.Second, "12m"},
		{3 * time.Hour, "3h"},
		{3*time.Hour + 4*time.Minute + 5*time.Second, "3h4m"},
		{2*24*time.Hour + 5*time.Hour + 7*time.Minute, "2d5h"},
		{400 * 24 * time.Hour, "400d"},
		{-90 * time.Second, "-1m"},
	}
	for _, tt := range tests {
		if got := FormatAge(tt.d); got != tt.want {
			t.Errorf("FormatAge(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := relative(now.Add(time.Hour), now); got != "in 1h" {
		t.Errorf("future time = %q", got)
	}
}

func sampleFields() []Field {
	return []Field{
		{"ID", "1714564500000-0"},
		{"Event ID", "evt-42"},
		{"Attempts", 3},
		{"Dead-lettered", now.Add(-5 * time.Minute)},
		{"Age", Age(3*time.Hour + 4*time.Minute)},
		{"Payload", `{"order":"A-1","note":"` + strings.Repeat("long text ", 8) + `","bin":"` + binary + `"}`},
		{"Owner", nil},
	}
}

func TestWriteFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"fields_tty_colour", Options{TTY: true, Width: 60, Now: now, profile: ansi()}},
		{"fields_tty_nocolor", Options{TTY: true, NoColor: true, Width: 60, Now: now, profile: ansi()}},
		{"fields_piped", Options{Now: now}},
		{"fields_markdown", Options{Format: FormatMarkdown, Now: now}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteFields(&buf, "Envelope", sampleFields(), tc.o); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			golden(t, tc.name, out)
			if strings.ContainsAny(out, "\x00\x07") || (tc.name != "fields_tty_colour" && strings.Contains(out, "\x1b")) {
				t.Errorf("unexpected control bytes: %q", out)
			}
			if tc.name == "fields_tty_colour" && !strings.Contains(out, "\x1b[1m") {
				t.Errorf("keys are not bold: %q", out)
			}
		})
	}
}

func TestWriteHistogram(t *testing.T) {
	bars := []Bar{{"0-1m", 120}, {"1m-1h", 30}, {"1h-1d", 1}, {"over a day", 0}}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"histogram_tty_colour", Options{TTY: true, Width: 40, profile: ansi()}},
		{"histogram_tty_nocolor", Options{TTY: true, NoColor: true, Width: 40, profile: ansi()}},
		{"histogram_piped", Options{}},
		{"histogram_markdown", Options{Format: FormatMarkdown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteHistogram(&buf, "Age", bars, tc.o); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, buf.String())
		})
	}
	var buf bytes.Buffer
	if err := WriteHistogram(&buf, "Age", bars, Options{TTY: true, NoColor: true, Width: 40}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if got := strings.Count(lines[1], "█"); got != 40-len("over a day")-len("120")-2 {
		t.Errorf("longest bar has %d blocks, want the width left after label and count:\n%s", got, buf.String())
	}
	if strings.Count(lines[3], "█") != 1 || strings.Contains(lines[4], "█") {
		t.Errorf("a count of 1 must show one block and 0 none:\n%s", buf.String())
	}
}

// TestWriteFieldsKeepsKeysAndLongValuesWhole: property names are never cut
// (six kafka_dlt-original-* headers must stay apart), and a digest or URL
// too wide for the value column goes whole on a line of its own instead of
// wrapping onto an indented second line that breaks it when copied.
func TestWriteFieldsKeepsKeysAndLongValuesWhole(t *testing.T) {
	digest := "sha256:ce0915b091bfadb565b39f896c11e5c220555df394edf196d12db9aab15c9673 (ok)"
	fs := []Field{
		{Key: "id", Value: "a-1"},
		{Key: "fingerprint", Value: digest},
		{Key: "properties.kafka_dlt-original-consumer-group", Value: "g1"},
		{Key: "properties.kafka_dlt-original-partition", Value: "3"},
		{Key: "last_error", Value: strings.Repeat("timeout calling payments ", 6)},
	}
	for _, o := range []Options{{Now: now}, {Format: FormatWide, Now: now}} {
		var buf bytes.Buffer
		if err := WriteFields(&buf, "", fs, o); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "properties.kafka_dlt-original-consumer-group\tg1") {
			t.Errorf("%s piped: a key was cut:\n%s", o.Format, buf.String())
		}
	}
	var buf bytes.Buffer
	if err := WriteFields(&buf, "", fs, Options{TTY: true, NoColor: true, Width: 80, Now: now}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"fingerprint\nsha256:ce0915b091bfadb565b39f896c11e5c220555df394edf196d12db9aab15c9673\n",
		"properties.kafka_dlt-original-consumer-group\n",
		"properties.kafka_dlt-original-partition\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal fields lack %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if w := lipgloss.Width(line); w > 80 {
			t.Errorf("line is %d columns wide: %q", w, line)
		}
	}
}

// TestWriteFieldsKeepsACommandOnOneLine: a Command (a resume command with
// a long journal path) is never wrapped on a terminal: beside its key
// when it fits, else whole on the next line; piped it is one value.
func TestWriteFieldsKeepsACommandOnOneLine(t *testing.T) {
	long := "dlqctl redrive resume /var/lib/dlqctl/incidents/INC-2211/payments-psp-outage/inc2211.plan.journal --past-gate"
	fs := []Field{{Key: "journal", Value: "j"}, {Key: "resume", Value: Command(long)}, {Key: "short", Value: Command("dlqctl redrive resume j")}}
	var buf bytes.Buffer
	if err := WriteFields(&buf, "", fs, Options{TTY: true, NoColor: true, Width: 80, Now: now}); err != nil {
		t.Fatal(err)
	}
	if want := "resume\n" + long + "\nshort    dlqctl redrive resume j\n"; !strings.Contains(buf.String(), want) {
		t.Errorf("terminal fields lack %q:\n%s", want, buf.String())
	}
	buf.Reset()
	if err := WriteFields(&buf, "", fs, Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "resume\t"+long+"\n") {
		t.Errorf("piped fields:\n%s", buf.String())
	}
}
