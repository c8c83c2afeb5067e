package script

import (
	"math"
	"math/bits"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// bit is LuaBitOp 1.0, as Redis ships it: 32-bit operations on numbers,
// results signed.

func openBit(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			r := tobit(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				r = op(r, tobit(L, i))
			}
			L.Push(lua.LNumber(int32(r)))
			return 1
		}
	}
	shift := func(op func(a uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			a, n := tobit(L, 1), tobit(L, 2)&31
			L.Push(lua.LNumber(int32(op(a, uint(n)))))
			return 1
		}
	}
	fns := map[string]lua.LGFunction{
		"tobit":  func(L *lua.LState) int { L.Push(lua.LNumber(int32(tobit(L, 1)))); return 1 },
		"bnot":   func(L *lua.LState) int { L.Push(lua.LNumber(int32(^tobit(L, 1)))); return 1 },
		"band":   fold(func(a, b uint32) uint32 { return a & b }),
		"bor":    fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":   fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift": shift(func(a uint32, n uint) uint32 { return a << n }),
		"rshift": shift(func(a uint32, n uint) uint32 { return a >> n }),
		"arshift": shift(func(a uint32, n uint) uint32 {
			return uint32(int32(a) >> n)
		}),
		"rol":   shift(func(a uint32, n uint) uint32 { return bits.RotateLeft32(a, int(n)) }),
		"ror":   shift(func(a uint32, n uint) uint32 { return bits.RotateLeft32(a, -int(n)) }),
		"bswap": func(L *lua.LState) int { L.Push(lua.LNumber(int32(bits.ReverseBytes32(tobit(L, 1))))); return 1 },
		"tohex": bitToHex,
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}

// tobit normalizes argument i as LuaBitOp does: rounded to an integer
// (half to even), then taken modulo 2^32.
func tobit(L *lua.LState, i int) uint32 {
	f := float64(L.CheckNumber(i))
	f = math.RoundToEven(f)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0
	}
	m := math.Mod(f, 4294967296)
	if m < 0 {
		m += 4294967296
	}
	return uint32(m)
}

func bitToHex(L *lua.LState) int {
	b := tobit(L, 1)
	n := int32(8)
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		n = int32(tobit(L, 2))
	}
	digits := "0123456789abcdef"
	if n == math.MinInt32 {
		n++ // Redis's fix of LuaBitOp's overflow: -2^31 is -(2^31-1)
	}
	if n < 0 {
		n = -n
		digits = strings.ToUpper(digits)
	}
	if n > 8 {
		n = 8
	}
	buf := make([]byte, n)
	for i := int(n) - 1; i >= 0; i-- {
		buf[i] = digits[b&15]
		b >>= 4
	}
	L.Push(lua.LString(buf))
	return 1
}
