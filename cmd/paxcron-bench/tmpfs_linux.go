package main

import "syscall"

// tmpfsMagic is f_type of a tmpfs mount (linux/magic.h).
const tmpfsMagic = 0x01021994

// isTmpfs reports whether dir lies on a tmpfs.
func isTmpfs(dir string) (bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false, err
	}
	return st.Type == tmpfsMagic, nil
}
