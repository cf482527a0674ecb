package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Prefix names everything the chaos test creates in Docker: containers,
// networks and the image. A run removes whatever carries it when it
// starts (a previous run killed before its cleanup) and when it ends.
const Prefix = "paxcron-chaos-"

// Image is the replicas' image, built FROM scratch.
const Image = Prefix + "replica:latest"

// ErrNoDocker says that no Docker engine answers.
var ErrNoDocker = errors.New("chaos: no Docker engine answers")

// DockerCallTimeout bounds one docker CLI call.
const DockerCallTimeout = 2 * time.Minute

// docker runs the docker CLI.
type docker struct {
	bin string
}

// findDocker returns the CLI if an engine answers through it, else an
// error wrapping ErrNoDocker that says why.
func findDocker(ctx context.Context) (*docker, error) {
	bin, err := exec.LookPath("docker")
	if err != nil {
		return nil, fmt.Errorf("%w: no docker CLI on PATH", ErrNoDocker)
	}
	d := &docker{bin: bin}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := d.run(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil || v == "" {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	return d, nil
}

// run calls docker with args and returns its trimmed standard output.
func (d *docker) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DockerCallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("chaos: docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// names lists the objects of a kind ("ps -a", "network ls") named with
// Prefix; field is the name's field in the listing's template.
func (d *docker) names(ctx context.Context, field string, list ...string) ([]string, error) {
	out, err := d.run(ctx, append(list, "--filter", "name="+Prefix, "--format", "{{."+field+"}}")...)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range strings.Fields(out) {
		if strings.HasPrefix(n, Prefix) { // the filter matches anywhere in the name
			names = append(names, n)
		}
	}
	return names, nil
}

// cleanup removes every container and network named with Prefix, and the
// image. It uses a context of its own, so that it also runs after Ctrl-C.
func (d *docker) cleanup(say func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	containers, err := d.names(ctx, "Names", "ps", "-a")
	if err != nil {
		say("cleanup: %v", err)
	}
	for _, c := range containers {
		if _, err := d.run(ctx, "rm", "-f", "-v", c); err != nil {
			say("cleanup: %v", err)
		}
	}
	networks, err := d.names(ctx, "Name", "network", "ls")
	if err != nil {
		say("cleanup: %v", err)
	}
	for _, n := range networks {
		if _, err := d.run(ctx, "network", "rm", n); err != nil {
			say("cleanup: %v", err)
		}
	}
	if out, _ := d.run(ctx, "images", "-q", Image); out != "" {
		if _, err := d.run(ctx, "rmi", "-f", Image); err != nil {
			say("cleanup: %v", err)
		}
	}
	if len(containers)+len(networks) > 0 {
		say("removed %d containers and %d networks named %s*", len(containers), len(networks), Prefix)
	}
}

// buildImage builds the paxcron binary statically (CGO_ENABLED=0) from
// the module at moduleDir and an image FROM scratch holding only it.
func (d *docker) buildImage(ctx context.Context, moduleDir, dir string) error {
	ctxDir := filepath.Join(dir, "image")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(ctxDir, "paxcron"), "./cmd/paxcron")
	build.Dir = moduleDir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("chaos: building a static paxcron: %w\n%s", err, out)
	}
	dockerfile := "FROM scratch\nCOPY paxcron /paxcron\nENTRYPOINT [\"/paxcron\"]\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	_, err := d.run(ctx, "build", "--quiet", "--label", "paxcron-chaos=1", "-t", Image, ctxDir)
	return err
}

// network is a docker bridge network the test created, internal (no
// route out of it), with a fixed subnet so that replicas keep their
// addresses across restarts and reconnects.
type network struct {
	Name    string
	Subnet  netip.Prefix
	Gateway netip.Addr
}

// addr is the subnet's n-th address.
func (n network) addr(i int) netip.Addr {
	a := n.Subnet.Addr()
	for range i {
		a = a.Next()
	}
	return a
}

// createNetwork creates an internal network (opts: more flags of
// docker network create). Docker picks a free subnet
// first; the network is then made again with that subnet fixed, because
// Docker assigns a container a fixed address (--ip) only in a subnet the
// user gave.
func (d *docker) createNetwork(ctx context.Context, name string, opts ...string) (network, error) {
	if _, err := d.run(ctx, append([]string{"network", "create", "--internal", "--label", "paxcron-chaos=1", name}, opts...)...); err != nil {
		return network{}, err
	}
	out, err := d.run(ctx, "network", "inspect", "--format", "{{json .IPAM.Config}}", name)
	if err != nil {
		return network{}, err
	}
	var cfg []struct{ Subnet, Gateway string }
	if err := json.Unmarshal([]byte(out), &cfg); err != nil || len(cfg) == 0 {
		return network{}, fmt.Errorf("chaos: network %s: no IPAM config in %q (%v)", name, out, err)
	}
	if _, err := d.run(ctx, "network", "rm", name); err != nil {
		return network{}, err
	}
	subnet, err := netip.ParsePrefix(cfg[0].Subnet)
	if err != nil || !subnet.Addr().Is4() {
		return network{}, fmt.Errorf("chaos: network %s: subnet %q: want IPv4 (%v)", name, cfg[0].Subnet, err)
	}
	n := network{Name: name, Subnet: subnet.Masked(), Gateway: subnet.Masked().Addr().Next()}
	if _, err := d.run(ctx, append([]string{"network", "create", "--internal", "--label", "paxcron-chaos=1",
		"--subnet", n.Subnet.String(), "--gateway", n.Gateway.String(), name}, opts...)...); err != nil {
		return network{}, err
	}
	return n, nil
}

// logs returns a container's whole output, both streams.
func (d *docker) logs(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, DockerCallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, "logs", name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("chaos: docker logs %s: %w", name, err)
	}
	return out.Bytes(), nil
}
