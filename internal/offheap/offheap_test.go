package offheap

import "testing"

func TestMapUnmap(t *testing.T) {
	base := Mapped()
	mem := Map(1 << 20)
	if mem == nil {
		t.Skip("no anonymous mmap on this system")
	}
	if len(mem) != 1<<20 || Mapped()-base != 1<<20 {
		t.Fatalf("len %d, mapped %d", len(mem), Mapped()-base)
	}
	for i := range mem {
		if mem[i] != 0 {
			t.Fatalf("byte %d is %d, want zero", i, mem[i])
		}
	}
	mem[len(mem)-1] = 1 // writable
	Unmap(mem)
	Unmap(nil)
	if Mapped() != base {
		t.Fatalf("mapped %d after Unmap, want %d", Mapped(), base)
	}
	if Map(0) != nil {
		t.Error("Map(0) is not nil")
	}
}
