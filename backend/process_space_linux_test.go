package backend

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlqctl/dlqctl/internal/testproc"
)

// TestProcessSpaceLinux: the boot ID is the kernel's, and the PID
// namespace is the inode that readlink shows for /proc/self/ns/pid; a
// process in another PID namespace under the same host name reads
// another namespace and the same boot, so that SamePIDSpace tells the
// two apart.
func TestProcessSpaceLinux(t *testing.T) {
	boot, ns := processSpace()
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	if boot != strings.TrimSpace(string(raw)) || len(boot) != 36 || link != "pid:["+ns+"]" {
		t.Fatalf("processSpace() = %q, %q; want the boot ID %q and the namespace of %q", boot, ns, strings.TrimSpace(string(raw)), link)
	}
	c := exec.Command("sh", "-c", "cat /proc/sys/kernel/random/boot_id; readlink /proc/self/ns/pid")
	testproc.InOtherPIDNamespace(c)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("start in another PID namespace: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[0] != boot || f[1] == link {
		t.Fatalf("another PID namespace reads %q; want boot %s and a namespace other than %s", f, boot, link)
	}
	host, _ := os.Hostname()
	me := ThisProcess("a", time.Time{})
	other := LeaseHolder{RunID: "b", PID: 1, Host: host, BootID: f[0], PIDNamespace: strings.TrimSuffix(strings.TrimPrefix(f[1], "pid:["), "]")}
	if SamePIDSpace(other, me) || !SamePIDSpace(me, me) {
		t.Fatalf("SamePIDSpace does not tell %+v from %+v", other, me)
	}
}
