package membership

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func validConfig() Config {
	return Config{
		Self:     info(1),
		Members:  []uint64{1, 2, 3},
		BindAddr: "127.0.0.1:0",
		Logger:   slog.New(slog.DiscardHandler),
		Events:   newRecorder(),
		Timing:   DefaultTiming(),
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (&Config{}).validate(); err == nil {
		t.Fatal("the zero Config is valid")
	}
	good := validConfig()
	if err := good.validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // in the error
	}{
		{"self not a member", func(c *Config) { c.Self = info(4) }, "Self.ID 4 is not among the Members"},
		{"self ID zero", func(c *Config) { c.Self.ID = 0 }, "replica ID is zero"},
		{"self bad address", func(c *Config) { c.Self.PaxosAddr = "nowhere" }, "PaxosAddr"},
		{"no members", func(c *Config) { c.Members = nil }, "0 replicas in Members"},
		{"too many members", func(c *Config) { c.Members = make([]uint64, MembersMax+1) }, "replicas in Members, want 1 to"},
		{"member zero", func(c *Config) { c.Members = []uint64{1, 0} }, "replica ID zero"},
		{"duplicate members", func(c *Config) { c.Members = []uint64{1, 2, 3, 2} }, "replica 2 twice"},
		{"empty BindAddr", func(c *Config) { c.BindAddr = "" }, "no BindAddr"},
		{"BindAddr no port", func(c *Config) { c.BindAddr = "127.0.0.1" }, "BindAddr"},
		{"BindAddr bad port", func(c *Config) { c.BindAddr = "127.0.0.1:70000" }, "port must be"},
		{"AdvertiseAddr a name", func(c *Config) { c.AdvertiseAddr = "replica1.lan:7946" }, "must be an IP"},
		{"AdvertiseAddr unspecified", func(c *Config) { c.AdvertiseAddr = "0.0.0.0:7946" }, "must be an IP"},
		{"seed without port", func(c *Config) { c.Join = []string{"10.0.0.2"} }, "in Join is not"},
		{"seed port 0", func(c *Config) { c.Join = []string{"10.0.0.2:0"} }, "in Join is not"},
		{"too many seeds", func(c *Config) { c.Join = make([]string, SeedsMax+1) }, "Join seeds"},
		{"key of 15 bytes", func(c *Config) { c.SecretKey = make([]byte, 15) }, "SecretKey has 15 bytes"},
		{"key of 33 bytes", func(c *Config) { c.SecretKey = make([]byte, 33) }, "SecretKey has 33 bytes"},
		{"no logger", func(c *Config) { c.Logger = nil }, "no Logger"},
		{"no events", func(c *Config) { c.Events = nil }, "no Events"},
		{"zero timing", func(c *Config) { c.Timing = Timing{} }, "Timing: ProbeInterval"},
		{"probe timeout too long", func(c *Config) { c.Timing.ProbeTimeout = c.Timing.ProbeInterval }, "ProbeTimeout"},
		{"suspicion mult 0", func(c *Config) { c.Timing.SuspicionMult = 0 }, "SuspicionMult"},
		{"backoff upside down", func(c *Config) { c.Timing.JoinBackoffInitial = time.Minute }, "JoinBackoffInitial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "membership: ") {
				t.Errorf("validate() = %v, want ErrConfig saying %q", err, tc.want)
			}
			if _, err := Start(c); !errors.Is(err, ErrConfig) {
				t.Errorf("Start() = %v, want ErrConfig", err)
			}
		})
	}
	for _, n := range []int{16, 24, 32} {
		c := validConfig()
		c.SecretKey = make([]byte, n)
		if err := c.validate(); err != nil {
			t.Errorf("key of %d bytes: %v", n, err)
		}
	}
}

func TestPresetsAreValid(t *testing.T) {
	for name, timing := range map[string]Timing{"DefaultTiming": DefaultTiming(), "MemberlistLANTiming": MemberlistLANTiming()} {
		if err := timing.validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestMemberlistLANTimingIsMemberlists checks the mapping of Timing onto
// memberlist's Config against memberlist's own LAN defaults.
func TestMemberlistLANTimingIsMemberlists(t *testing.T) {
	cfg := validConfig()
	cfg.Timing = MemberlistLANTiming()
	m := &Membership{cfg: cfg, log: cfg.Logger}
	got, want := m.memberlistConfig(), memberlist.DefaultLANConfig()
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"ProbeInterval", got.ProbeInterval, want.ProbeInterval},
		{"ProbeTimeout", got.ProbeTimeout, want.ProbeTimeout},
		{"SuspicionMult", got.SuspicionMult, want.SuspicionMult},
		{"SuspicionMaxTimeoutMult", got.SuspicionMaxTimeoutMult, want.SuspicionMaxTimeoutMult},
		{"IndirectChecks", got.IndirectChecks, want.IndirectChecks},
		{"GossipInterval", got.GossipInterval, want.GossipInterval},
		{"GossipToTheDeadTime", got.GossipToTheDeadTime, want.GossipToTheDeadTime},
		{"PushPullInterval", got.PushPullInterval, want.PushPullInterval},
		{"TCPTimeout", got.TCPTimeout, want.TCPTimeout},
		{"RetransmitMult", got.RetransmitMult, want.RetransmitMult},
	} {
		if f.got != f.want {
			t.Errorf("%s = %v, memberlist's LAN default is %v", f.name, f.got, f.want)
		}
	}
	if got.DeadNodeReclaimTime != cfg.Timing.DeadNodeReclaimTime || got.Name != "replica-1" || got.Label != label {
		t.Errorf("DeadNodeReclaimTime %v, Name %q, Label %q", got.DeadNodeReclaimTime, got.Name, got.Label)
	}
}

// TestDefaultTimingDetectionBounds checks the arithmetic of the Timing
// comment for three replicas. From the first probe of the crashed
// replica to both survivors' PeerSuspected: the probe interval, the
// suspicion timeout and a gossip round, under a second. Before it, the
// wait for a probe: each survivor probes the crashed replica every other
// interval, or three intervals apart when memberlist reshuffles its probe
// order, so the slowest case stays under 1.5 s.
func TestDefaultTimingDetectionBounds(t *testing.T) {
	tm := DefaultTiming()
	afterProbe := tm.ProbeInterval + time.Duration(tm.SuspicionMult)*tm.ProbeInterval + tm.GossipInterval
	if afterProbe > time.Second {
		t.Errorf("from the first failed probe: %v, want at most 1s", afterProbe)
	}
	if worst := 3*tm.ProbeInterval + afterProbe; worst > 1500*time.Millisecond {
		t.Errorf("worst case: %v, want at most 1.5s", worst)
	}
}

func TestAddressesMapOntoMemberlist(t *testing.T) {
	for _, tc := range []struct {
		bind, advertise     string
		wantBind, wantAdv   string
		wantPort, wantAPort int
	}{
		{"127.0.0.1:7946", "", "127.0.0.1", "", 7946, 7946},
		{":7946", "10.1.2.3:0", "0.0.0.0", "10.1.2.3", 7946, 7946},
		{"0.0.0.0:7946", "10.1.2.3:17946", "0.0.0.0", "10.1.2.3", 7946, 17946},
		{"127.0.0.1:0", "", "127.0.0.1", "", 0, 0},
	} {
		cfg := validConfig()
		cfg.BindAddr, cfg.AdvertiseAddr = tc.bind, tc.advertise
		m := &Membership{cfg: cfg, log: cfg.Logger}
		mc := m.memberlistConfig()
		if mc.BindAddr != tc.wantBind || mc.BindPort != tc.wantPort || mc.AdvertiseAddr != tc.wantAdv || mc.AdvertisePort != tc.wantAPort {
			t.Errorf("%q, %q: bind %s:%d advertise %q:%d", tc.bind, tc.advertise, mc.BindAddr, mc.BindPort, mc.AdvertiseAddr, mc.AdvertisePort)
		}
	}
}

func TestParseMemberlistLine(t *testing.T) {
	for _, tc := range []struct {
		line  string
		msg   string
		level slog.Level
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n", "memberlist: Stream connection from=127.0.0.1:1", slog.LevelDebug},
		{"[INFO] memberlist: Marking replica-3 as failed\n", "memberlist: Marking replica-3 as failed", slog.LevelInfo},
		{"[WARN] memberlist: Refuting a suspect message\n", "memberlist: Refuting a suspect message", slog.LevelWarn},
		{"[ERR] memberlist: Failed to send ping\n", "memberlist: Failed to send ping", slog.LevelError},
		{"something else\n", "something else", slog.LevelWarn},
	} {
		msg, level := parseMemberlistLine([]byte(tc.line))
		if msg != tc.msg || level != tc.level {
			t.Errorf("%q: %q at %v, want %q at %v", tc.line, msg, level, tc.msg, tc.level)
		}
	}
}
