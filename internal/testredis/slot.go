package testredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot is key's hash slot as the Redis Cluster specification defines it:
// CRC16 (XMODEM) of the key, or of its hash tag (what is between the first
// "{" and the first "}" after it, when that is not empty), modulo 16384.
// TestSlotMatchesClusterKeyslot checks it against CLUSTER KEYSLOT.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM: polynomial 0x1021, initial value 0.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// SlotCheck is a go-redis hook that fails tb when a command, a script or a
// transaction touches keys of more than one hash slot: what a Redis Cluster
// refuses (CROSSSLOT) or, for a transaction, cannot make atomic. Single
// nodes accept such keys, so every test on a single node checks with it
// what a Cluster would refuse. Plain pipelines may span slots (the cluster
// client splits them), each of their commands may not.
func SlotCheck(tb testing.TB) redis.Hook { return slotCheck{tb} }

type slotCheck struct{ tb testing.TB }

func (slotCheck) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slotCheck) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.check(cmd.String(), CommandKeys(cmd.Args()))
		return next(ctx, cmd)
	}
}

func (h slotCheck) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "multi" {
			var keys []string
			names := make([]string, 0, len(cmds))
			for _, c := range cmds {
				keys = append(keys, CommandKeys(c.Args())...)
				names = append(names, c.Name())
			}
			h.check("MULTI "+strings.Join(names, " "), keys)
		} else {
			for _, c := range cmds {
				h.check(c.String(), CommandKeys(c.Args()))
			}
		}
		return next(ctx, cmds)
	}
}

func (h slotCheck) check(what string, keys []string) {
	for _, k := range keys[min(1, len(keys)):] {
		if Slot(k) != Slot(keys[0]) {
			h.tb.Errorf("cross-slot keys in one step (a Redis Cluster refuses it): %q (slot %d) and %q (slot %d) in %.200s",
				keys[0], Slot(keys[0]), k, Slot(k), what)
			return
		}
	}
}

// CommandKeys are the keys of one command given as its arguments, for the
// commands that take more than one key or take them after other arguments;
// any other command's key is its first argument (none for the keyless
// commands the gateway sends).
func CommandKeys(args []any) []string {
	if len(args) < 2 {
		return nil
	}
	str := func(i int) string {
		if i >= len(args) {
			return ""
		}
		return fmt.Sprint(args[i])
	}
	strs := func(from, to, step int) []string {
		var out []string
		for i := from; i < to && i < len(args); i += step {
			out = append(out, str(i))
		}
		return out
	}
	switch name := strings.ToLower(str(0)); name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		n, _ := strconv.Atoi(str(2))
		return strs(3, 3+n, 1)
	case "mget", "del", "unlink", "exists", "touch", "watch", "sunion", "sinter", "sdiff", "pfcount", "pfmerge",
		"sunionstore", "sinterstore", "sdiffstore", "rename", "renamenx", "smove", "rpoplpush", "lmove", "copy":
		return strs(1, len(args), 1)
	case "mset", "msetnx":
		return strs(1, len(args), 2)
	case "xread", "xreadgroup":
		for i := 1; i < len(args); i++ {
			if strings.EqualFold(str(i), "streams") {
				rest := len(args) - i - 1
				return strs(i+1, i+1+rest/2, 1)
			}
		}
		return nil
	case "multi", "exec", "discard", "unwatch", "ping", "time", "info", "publish", "subscribe", "psubscribe",
		"unsubscribe", "punsubscribe", "script", "cluster", "client", "hello", "auth", "select", "command", "flushall",
		"flushdb", "dbsize", "sentinel", "config", "debug", "readonly", "wait", "role", "scan", "keys":
		return nil
	}
	return []string{str(1)}
}
