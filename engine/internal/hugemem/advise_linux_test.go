package hugemem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// Until Advise turns it on, a large array is made as make makes it, with
// no advice. Checked in a process of its own (this test binary, run again
// for this test alone): there the heap has advised nothing the array could
// be cut from, whatever the package's other tests did before, in whatever
// order they ran.
func TestMakeAdvisesNothingUnasked(t *testing.T) {
	if os.Getenv(unaskedChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMakeAdvisesNothingUnasked$", "-test.count", "1")
		cmd.Env = append(os.Environ(), unaskedChild+"=1")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
			t.Fatalf("in a process of its own: %v\n%s", err, out)
		}
		return
	}
	big := Make[byte](0, 16*Min)
	at := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	_, flags := vma(t, at+uintptr(cap(big))/2)
	runtime.KeepAlive(big)
	if strings.Contains(flags, " hg") {
		t.Fatalf("an array made with the advice off is advised: flags %s", flags)
	}
}

// unaskedChild, set, has TestMakeAdvisesNothingUnasked check in the
// process it runs in.
const unaskedChild = "HUGEMEM_TEST_UNASKED_CHILD"

// An array of Min bytes or more is advised once Advise turned it on: its
// mapping is marked for huge pages, and the kernel counts it eligible for
// them unless the system's transparent huge pages are off.
func TestMakeAdvisesLargeArrays(t *testing.T) {
	advised(t)
	mode := thpMode(t)
	big := Make[byte](0, 4*Min)
	at := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
	off, _ := aligned(at, uintptr(cap(big)))
	eligible, flags := vma(t, at+off)
	runtime.KeepAlive(big)
	if mode == "" {
		// A kernel without transparent huge pages refuses the advice.
		if eligible || strings.Contains(flags, " hg") {
			t.Fatalf("no transparent huge pages, yet the mapping says eligible %v, flags %s", eligible, flags)
		}
		return
	}
	if !strings.Contains(flags, " hg") {
		t.Fatalf("the array's mapping is not advised for huge pages: flags %s", flags)
	}
	if want := mode != "never"; eligible != want {
		t.Fatalf("transparent huge pages %q: the array's mapping THPeligible %v, want %v", mode, eligible, want)
	}
}

// thpMode reads the system's transparent huge page mode: always, madvise
// or never, or "" for a kernel without them.
func thpMode(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		t.Fatalf("transparent_hugepage/enabled reads %q", s)
	}
	return s[i+1 : j]
}

// vma finds the mapping holding address at in /proc/self/smaps and returns
// whether the kernel counts it eligible for huge pages, and its VmFlags.
func vma(t *testing.T, at uintptr) (eligible bool, flags string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= at && at < hi
			continue
		}
		if !in {
			continue
		}
		switch {
		case strings.HasPrefix(line, "THPeligible:"):
			eligible = strings.TrimSpace(strings.TrimPrefix(line, "THPeligible:")) == "1"
		case strings.HasPrefix(line, "VmFlags:"):
			return eligible, strings.TrimPrefix(line, "VmFlags:")
		}
	}
	t.Fatalf("no mapping holds %#x", at)
	return false, ""
}
