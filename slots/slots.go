// Package slots maps keys to Redis Cluster hash slots, exactly as Redis
// does (keyHashSlot in Redis's cluster.c), and turns a slot-to-owner map
// into runs of consecutive slots. It imports nothing of rlserver: the
// command layer, the groups and the clients all hash keys with it.
package slots

// Count is the number of hash slots; a key's slot is in [0, Count).
const Count = 16384

// Of returns key's hash slot: CRC16 (XMODEM: polynomial 0x1021, initial
// value 0, no reflection, as Redis's crc16.c) of the key modulo Count.
// When the key holds a hash tag (the bytes between its first '{' and the
// first '}' after it) and the tag is not empty, only the tag is hashed,
// so "{user42}:a" and "{user42}:b" share a slot. An empty tag ("{}x")
// or an unclosed '{' hashes the whole key.
func Of(key []byte) int { return of(key) }

// OfString is Of for a string key.
func OfString(key string) int { return of(key) }

func of[K string | []byte](key K) int {
	for s := 0; s < len(key); s++ {
		if key[s] != '{' {
			continue
		}
		for e := s + 1; e < len(key); e++ {
			if key[e] == '}' {
				if e > s+1 {
					key = key[s+1 : e]
				}
				break
			}
		}
		break
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return int(crc & (Count - 1))
}

// crcTable is CRC16-XMODEM's byte table, computed at start-up from the
// polynomial.
var crcTable = func() (t [256]uint16) {
	const poly = 0x1021
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ poly
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
