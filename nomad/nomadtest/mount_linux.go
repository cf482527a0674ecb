package nomadtest

import (
	"bufio"
	"os"
	"strings"
	"syscall"
)

// unmountUnder detaches the mounts left under dir. As root, the client
// mounts a tmpfs on each task's secrets and private directories and
// unmounts them when it destroys the allocation; an agent that had to be
// killed leaves them, and then its directory cannot be removed.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 && strings.HasPrefix(unescapeMount(fields[1]), dir+"/") {
			points = append(points, unescapeMount(fields[1]))
		}
	}
	for i := len(points) - 1; i >= 0; i-- { // the innermost first
		syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// unescapeMount undoes the octal escapes of /proc/self/mounts (\040 for a
// space, and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }
