package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

// The systemd units of docs/systemd, started as systemd would start them
// where systemd cannot run (no systemd as PID 1 in a container): the
// unit's RestrictAddressFamilies as the seccomp filter systemd installs
// (socket() of another family fails with EAFNOSUPPORT), its capabilities
// (bounding and ambient set), NoNewPrivileges and a user other than root
// (DynamicUser) by setpriv, inside a network namespace of the test's own
// whose interface is eth0. Not emulated: the file-system protections
// (ProtectSystem, PrivateTmp...), which kfsniff's capture does not touch.

// sandboxEnv carries the address families to the test binary re-executed
// as the filter's installer (TestMain).
const sandboxEnv = "KFSNIFF_TEST_SECCOMP_FAMILIES"

func TestMain(m *testing.M) {
	if fams, ok := os.LookupEnv(sandboxEnv); ok {
		os.Exit(sandboxExec(fams, os.Args[1:]))
	}
	code := m.Run()
	if unitBin.path != "" {
		os.RemoveAll(filepath.Dir(unitBin.path))
	}
	os.Exit(code)
}

// families are the address families a unit may name.
var families = map[string]uint32{
	"AF_UNIX": unix.AF_UNIX, "AF_INET": unix.AF_INET, "AF_INET6": unix.AF_INET6,
	"AF_PACKET": unix.AF_PACKET, "AF_NETLINK": unix.AF_NETLINK,
}

// sandboxExec installs systemd's RestrictAddressFamilies filter for the
// families named (space-separated) on this thread, which execve passes
// on, and executes args.
func sandboxExec(fams string, args []string) int {
	var allowed []uint32
	for _, f := range strings.Fields(fams) {
		v, ok := families[f]
		if !ok {
			fmt.Fprintf(os.Stderr, "sandbox: unknown address family %s\n", f)
			return 125
		}
		allowed = append(allowed, v)
	}
	// The filter: x86-64 socket() whose first argument is not an allowed
	// family fails with EAFNOSUPPORT; everything else is allowed (as
	// systemd's, which filters nothing but the family).
	const (
		ldW    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
		archX8 = 0xc000003e // AUDIT_ARCH_X86_64
	)
	if runtime.GOARCH != "amd64" {
		fmt.Fprintln(os.Stderr, "sandbox: the filter is written for amd64")
		return 125
	}
	n := uint8(len(allowed))
	prog := []unix.SockFilter{
		{Code: ldW, K: 4}, // seccomp_data.arch
		{Code: jeqK, Jt: 1, K: archX8},
		{Code: retK, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: ldW, K: 0}, // seccomp_data.nr
		{Code: jeqK, Jt: 0, Jf: n + 2, K: unix.SYS_SOCKET},
		{Code: ldW, K: 16}, // args[0], low 32 bits
	}
	for i, f := range allowed {
		// Jump past the remaining comparisons and the refusal to ALLOW.
		prog = append(prog, unix.SockFilter{Code: jeqK, Jt: n - uint8(i), K: f})
	}
	prog = append(prog,
		unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)},
		unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_ALLOW})
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: no_new_privs:", err)
		return 125
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox: seccomp:", err)
		return 125
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		return 125
	}
	err = syscall.Exec(path, args, os.Environ())
	fmt.Fprintln(os.Stderr, "sandbox: exec:", err)
	return 125
}

// unit is what a test needs of a systemd unit file.
type unit struct {
	execStart []string
	families  string
	caps      []string // setpriv's names: net_raw
	noNewPriv bool
}

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var u unit
	ambient, bounding := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "ExecStart":
			u.execStart = strings.Fields(v)
		case "RestrictAddressFamilies":
			u.families = v
		case "AmbientCapabilities":
			ambient = v
		case "CapabilityBoundingSet":
			bounding = v
		case "NoNewPrivileges":
			u.noNewPriv = v == "yes"
		}
	}
	if ambient != bounding {
		t.Fatalf("%s: AmbientCapabilities %q and CapabilityBoundingSet %q differ", path, ambient, bounding)
	}
	for _, c := range strings.Fields(ambient) {
		u.caps = append(u.caps, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	if len(u.execStart) == 0 || u.families == "" || !u.noNewPriv {
		t.Fatalf("%s: want ExecStart, RestrictAddressFamilies, capabilities and NoNewPrivileges=yes: %+v", path, u)
	}
	return u
}

// netns is a network namespace of the test's own with a veth pair: eth0
// inside (addr), the peer outside (peerAddr).
type netns struct {
	name, addr, peerAddr, peer string
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip(8): iproute2 is needed for the network namespace")
	}
	pid := os.Getpid()
	n := &netns{name: fmt.Sprintf("kfunit%d", pid), peer: fmt.Sprintf("kfu%d", pid),
		addr: fmt.Sprintf("10.78.%d.2", pid%250), peerAddr: fmt.Sprintf("10.78.%d.1", pid%250)}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	exec.Command("ip", "netns", "del", n.name).Run()
	ip("netns", "add", n.name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.name).Run() })
	ip("-n", n.name, "link", "add", "eth0", "type", "veth", "peer", "name", n.peer)
	ip("-n", n.name, "link", "set", n.peer, "netns", "1")
	t.Cleanup(func() { exec.Command("ip", "link", "del", n.peer).Run() })
	ip("-n", n.name, "addr", "add", n.addr+"/30", "dev", "eth0")
	ip("-n", n.name, "link", "set", "eth0", "up")
	ip("-n", n.name, "link", "set", "lo", "up")
	ip("addr", "add", n.peerAddr+"/30", "dev", n.peer)
	ip("link", "set", n.peer, "up")
	return n
}

// index is eth0's interface index inside the namespace.
func (n *netns) index(t *testing.T) string {
	out, err := exec.Command("ip", "-n", n.name, "-o", "link", "show", "eth0").Output()
	if err != nil {
		t.Fatal(err)
	}
	i, _, _ := strings.Cut(string(out), ":")
	return strings.TrimSpace(i)
}

// listen listens on addr inside the namespace: the socket is the
// namespace's, whichever thread uses it later.
func (n *netns) listen(network, addr string) (net.Listener, error) {
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + n.name)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	l, lerr := net.Listen(network, addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// This thread stays in the namespace: never unlocked, it ends
		// with its goroutine.
		return nil, fmt.Errorf("back from the namespace: %v", err)
	}
	runtime.UnlockOSThread()
	return l, lerr
}

// sandboxed is the command that runs args in the namespace as the unit
// would: the unit's address families by seccomp, then setpriv for the
// user, capabilities and no_new_privs.
func (n *netns) sandboxed(u unit, fams string, args ...string) *exec.Cmd {
	caps := "-all"
	for _, c := range u.caps {
		caps += ",+" + c
	}
	self, _ := os.Executable()
	argv := []string{"netns", "exec", n.name, self,
		"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=" + caps, "--ambient-caps=" + caps, "--bounding-set=" + caps, "--no-new-privs", "--"}
	cmd := exec.Command("ip", append(argv, args...)...)
	cmd.Env = append(os.Environ(), sandboxEnv+"="+fams)
	return cmd
}

// publicBinary builds kfsniff, once for the unit tests, where the
// unprivileged user can run it.
func publicBinary(t *testing.T) string {
	t.Helper()
	unitBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "kfsniff-unit")
		if err != nil {
			unitBin.err = err
			return
		}
		bin := filepath.Join(dir, "kfsniff")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			unitBin.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		unitBin.err = os.Chmod(dir, 0o755)
		unitBin.path = bin
	})
	if unitBin.err != nil {
		t.Fatal(unitBin.err)
	}
	return unitBin.path
}

// unitBin is the unit tests' binary, removed by TestMain.
var unitBin struct {
	once sync.Once
	path string
	err  error
}

// TestUnitNamedInterface starts docs/systemd/kfsniff-agent.service's
// ExecStart under the unit's address-family filter, capabilities and an
// unprivileged user in a network namespace, with -i eth0 and -i INDEX
// instead of -i any: each captures the Kafka traffic crossing eth0 (its
// metrics count kgo's Produce requests) and stops on SIGTERM with exit 0
// and its report, as systemctl stop does. -D lists eth0. The unit as
// shipped before this test, without AF_NETLINK, fails each (exit 2:
// Go's interface lookup reads netlink): the filter is the one that bit.
func TestUnitNamedInterface(t *testing.T) {
	needLive(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv (util-linux): cannot drop to the unit's user and capabilities")
	}
	u := readUnit(t, "../../docs/systemd/kfsniff-agent.service")
	if strings.Join(u.caps, ",") != "net_raw" {
		t.Errorf("capabilities %v, want CAP_NET_RAW alone (-p: no promiscuous mode)", u.caps)
	}
	if !strings.Contains(u.families, "AF_NETLINK") {
		t.Errorf("RestrictAddressFamilies=%s: without AF_NETLINK, -i NAME, -i INDEX and -D fail", u.families)
	}
	ns := newNetns(t)
	bin := publicBinary(t)

	sink, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(9092), kfake.SeedTopics(1, "unit"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return ns.listen(network, net.JoinHostPort(ns.addr, "9092"))
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()

	// The unit's command line, the interface and the binary replaced.
	argsFor := func(iface string) []string {
		args := append([]string{bin}, u.execStart[1:]...)
		for i := range args {
			if args[i] == "-i" && i+1 < len(args) {
				args[i+1] = iface
			}
		}
		return args
	}
	withoutNetlink := strings.Join(strings.Fields(strings.ReplaceAll(u.families, "AF_NETLINK", "")), " ")

	for _, iface := range []string{"eth0", ns.index(t)} {
		t.Run("-i "+iface, func(t *testing.T) {
			// The filter without AF_NETLINK: exit 2 at once.
			out, err := ns.sandboxed(u, withoutNetlink, argsFor(iface)...).CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
				t.Errorf("RestrictAddressFamilies=%s: %v, want exit 2:\n%s", withoutNetlink, err, out)
			}

			cmd := ns.sandboxed(u, u.families, argsFor(iface)...)
			var stdout strings.Builder
			stderr := newStderrWatch()
			cmd.Stdout, cmd.Stderr = &stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			url := "http://" + net.JoinHostPort(ns.addr, "9898") + "/metrics"
			select {
			case <-stderr.ready:
			case <-time.After(10 * time.Second):
				t.Fatalf("not listening after 10 s:\n%s", stderr)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(net.JoinHostPort(ns.addr, "9092")), kgo.DefaultProduceTopic("unit"),
				kgo.ClientID("unit-producer"), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			const records = 20
			for i := range records {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cl.Close()
			var got float64
			for deadline := time.Now().Add(10 * time.Second); got < records; time.Sleep(200 * time.Millisecond) {
				s, _ := scrape(t, url)
				got = s.Sum("kfsniff_requests_total", map[string]string{"api": "Produce"})
				if time.Now().After(deadline) {
					t.Fatalf("%v Produce requests on the metrics after 10 s, want %d\n%s", got, records, stderr)
				}
			}
			if s, body := scrape(t, url); s.Sum("kfsniff_build_info", map[string]string{"mode": "agent"}) != 1 {
				t.Errorf("agent's scrape without kfsniff_build_info{mode=\"agent\"}:\n%s", body)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			err = cmd.Wait()
			if err != nil || !strings.Contains(stdout.String(), "Produce") {
				t.Errorf("SIGTERM: %v, want exit 0 and the report\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr)
			}
		})
	}

	t.Run("-D", func(t *testing.T) {
		out, err := ns.sandboxed(u, u.families, bin, "-D").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "eth0") {
			t.Errorf("-D: %v, want eth0 listed:\n%s", err, out)
		}
		out, err = ns.sandboxed(u, withoutNetlink, bin, "-D").CombinedOutput()
		if _, ok := err.(*exec.ExitError); !ok || !strings.Contains(string(out), "address family not supported") {
			t.Errorf("-D, RestrictAddressFamilies=%s: %v, want a failure for want of netlink:\n%s", withoutNetlink, err, out)
		}
	})
}

// TestUnitCorrelator starts docs/systemd/kfsniff-correlator.service's
// ExecStart under its address-family filter, no capability and an
// unprivileged user in a network namespace, reading a kfake export
// cluster there that an agent shipped a capture to: it serves the
// correlated requests as metrics, and stops on SIGTERM with exit 0 and
// its report.
func TestUnitCorrelator(t *testing.T) {
	needLive(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv (util-linux): cannot drop to the unit's user and capabilities")
	}
	u := readUnit(t, "../../docs/systemd/kfsniff-correlator.service")
	if len(u.caps) != 0 {
		t.Errorf("capabilities %v: a correlator captures nothing", u.caps)
	}
	ns := newNetns(t)
	bin := publicBinary(t)
	sink, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(9094), kfake.SeedTopics(4, "kfsniff", "kfsniff.findings"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return ns.listen(network, net.JoinHostPort(ns.addr, "9094"))
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	url := "kafka://" + net.JoinHostPort(ns.addr, "9094") + "/kfsniff"
	if code, _, stderr := kfsniff(t, "-r", fixture("scenarios/mm2-replay.pcap"), "--export", url, "--agent-id", "h1"); code != 0 {
		t.Fatalf("shipping: exit %d\n%s", code, stderr)
	}
	args := append([]string{bin}, u.execStart[1:]...)
	for i := range args {
		if strings.HasPrefix(args[i], "kafka://") {
			args[i] = url
		}
	}
	cmd := ns.sandboxed(u, u.families, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	errw := newStderrWatch()
	cmd.Stderr = errw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	metrics := "http://" + net.JoinHostPort(ns.addr, "9899") + "/metrics"
	var got float64
	for deadline := time.Now().Add(20 * time.Second); got == 0; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no correlated request on %s after 20 s\n%s", metrics, errw)
		}
		if resp, err := http.Get(metrics); err == nil {
			resp.Body.Close()
			s, _ := scrape(t, metrics)
			got = s.Sum("kfsniff_requests_total", nil)
		}
	}
	// Its own metrics: what it read, the lag behind the topic (0 once
	// read), and its mode for the dashboard.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		s, body := scrape(t, metrics)
		if s.Sum("kfsniff_correlate_records_total", nil) > 0 {
			if s.Sum("kfsniff_build_info", map[string]string{"mode": "correlator"}) != 1 || !s.Has("kfsniff_correlate_lag_records") {
				t.Errorf("correlator's scrape without kfsniff_build_info{mode=\"correlator\"} or its lag:\n%s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kfsniff_correlate_records_total still 0 after 10 s:\n%s", body)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if err != nil || !strings.Contains(stdout.String(), "Correlation") {
		t.Errorf("SIGTERM: %v, want exit 0 and the report\nstdout:\n%s\nstderr:\n%s%s", err, stdout.String(), errw, stderr.String())
	}
}
