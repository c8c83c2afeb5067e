package kv_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/values"
)

func TestHashCommands(t *testing.T) {
	wrongArgs := func(name string) string { return hzE("ERR wrong number of arguments for '" + name + "' command") }
	tables := map[string][]hzStep{
		"set and get": {
			{"HSET h a 1", hzI(1), ""},
			{"HSET h a 2 b 3 c 4", hzI(2), ""},
			{"HSET h a 2 a 5", hzI(0), ""},
			{"HGET h a", hzB("5"), ""},
			{"HGET h zz", hzNil, hzNil3},
			{"HGET nokey a", hzNil, hzNil3},
			{"HMGET h a zz c", hzA(hzB("5"), hzNil, hzB("4")), hzA(hzB("5"), hzNil3, hzB("4"))},
			{"HMGET nokey a", hzA(hzNil), hzA(hzNil3)},
			{"HLEN h", hzI(3), ""},
			{"HLEN nokey", hzI(0), ""},
			{"HSET h", wrongArgs("hset"), ""},
			{"HSET h a", wrongArgs("hset"), ""},
			{"HSET h a 1 b", wrongArgs("hset"), ""},
			{"HMSET h a 1 b", wrongArgs("hmset"), ""},
			{"HMSET h a 7 d 8", hzOK, ""},
			{"HGETALL h", hzBs("a", "7", "b", "3", "c", "4", "d", "8"),
				"%4\r\n" + hzB("a") + hzB("7") + hzB("b") + hzB("3") + hzB("c") + hzB("4") + hzB("d") + hzB("8")},
			{"HKEYS h", hzBs("a", "b", "c", "d"), ""},
			{"HVALS h", hzBs("7", "3", "4", "8"), ""},
			{"HGETALL nokey", hzEmpty, "%0\r\n"},
			{"HKEYS nokey", hzEmpty, ""},
			{"HVALS nokey", hzEmpty, ""},
			{"HEXISTS h a", hzI(1), ""},
			{"HEXISTS h zz", hzI(0), ""},
			{"HEXISTS nokey a", hzI(0), ""},
			{"HSTRLEN h a", hzI(1), ""},
			{"HSET h long abcdefgh '' ''", hzI(2), ""},
			{"HSTRLEN h long", hzI(8), ""},
			{"HSTRLEN h ''", hzI(0), ""},
			{"HGET h ''", hzB(""), ""},
			{"HSTRLEN nokey a", hzI(0), ""},
		},
		"setnx": {
			{"HSETNX h a 1", hzI(1), ""},
			{"HSETNX h a 2", hzI(0), ""},
			{"HGET h a", hzB("1"), ""},
			{"HSETNX h b 2", hzI(1), ""},
			{"HGETALL h", hzBs("a", "1", "b", "2"), "%2\r\n" + hzB("a") + hzB("1") + hzB("b") + hzB("2")},
		},
		"del keeps order, deletes an empty hash": {
			{"HSET h a 1 b 2 c 3", hzI(3), ""},
			{"HDEL h b zz", hzI(1), ""},
			{"HSET h b 9 d 4", hzI(2), ""},
			{"HKEYS h", hzBs("a", "c", "b", "d"), ""},
			{"HDEL h zz", hzI(0), ""},
			{"HDEL nokey a", hzI(0), ""},
			{"HDEL h a b c d a", hzI(4), ""},
			{"HLEN h", hzI(0), ""},
			{"ZADD h 1 a", hzI(1), ""}, // the key is gone: no WRONGTYPE
		},
		"hincrby": {
			{"HINCRBY h n 5", hzI(5), ""},
			{"HINCRBY h n -7", hzI(-2), ""},
			{"HGET h n", hzB("-2"), ""},
			{"HINCRBY h n x", hzE(kv.ErrNotInteger), ""},
			{"HINCRBY h n 1.5", hzE(kv.ErrNotInteger), ""},
			{"HINCRBY h n +1", hzE(kv.ErrNotInteger), ""},
			{"HINCRBY h n 9223372036854775808", hzE(kv.ErrNotInteger), ""},
			{"HSET h s abc sp ' 1' z -0", hzI(3), ""},
			{"HINCRBY h s 1", hzE(kv.ErrHashNotInt), ""},
			{"HINCRBY h sp 1", hzE(kv.ErrHashNotInt), ""},
			{"HINCRBY h z 1", hzE(kv.ErrHashNotInt), ""},
			{"HSET h big 9223372036854775807 small -9223372036854775808", hzI(2), ""},
			{"HINCRBY h big 1", hzE(kv.ErrOverflow), ""},
			{"HINCRBY h big 0", hzI(9223372036854775807), ""},
			{"HINCRBY h small -1", hzE(kv.ErrOverflow), ""},
			{"HINCRBY h small 1", hzI(-9223372036854775807), ""},
			{"HINCRBY nokey n 1", hzI(1), ""},
		},
		"hincrbyfloat": {
			{"HINCRBYFLOAT h f 0.1", hzB("0.1"), ""},
			{"HINCRBYFLOAT h f 0.2", hzB("0.3"), ""},
			{"HINCRBYFLOAT h f -0.3", hzB("0"), ""},
			{"HINCRBYFLOAT h f 1.5e-10", hzB("0.00000000015"), ""},
			{"HINCRBYFLOAT h g 10", hzB("10"), ""},
			{"HINCRBYFLOAT h g -12.5", hzB("-2.5"), ""},
			{"HINCRBYFLOAT h x 0x10", hzB("16"), ""},
			{"HINCRBYFLOAT h u 123456789012345678", hzB("123456789012345678"), ""},
			{"HINCRBYFLOAT h u 0.1", hzB("123456789012345678.1015625"), ""}, // 64-bit significand,
			{"HINCRBYFLOAT h t 0.000003814697265625", hzB("0.00000381469726562"), ""},
			{"HINCRBYFLOAT h w -1e-20", hzB("0"), ""},
			{"HINCRBYFLOAT h x abc", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x ' 1'", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x ''", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x nan", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x 1e5000", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x 1e-5000", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x inf", hzE(kv.ErrIncrNaNOrInf), ""},
			{"HINCRBYFLOAT h x -Infinity", hzE(kv.ErrIncrNaNOrInf), ""},
			{"HSET h s abc i 5 inf inf", hzI(3), ""},
			{"HINCRBYFLOAT h s 1", hzE(kv.ErrHashNotFloat), ""},
			{"HINCRBYFLOAT h i 1.25", hzB("6.25"), ""},
			{"HINCRBYFLOAT h inf 1", hzE(kv.ErrNaN), ""},
			{"HINCRBYFLOAT h huge 1e4000", hzHuge(), ""},
			{"HINCRBYFLOAT h huge 1.2e4932", hzE(kv.ErrNotFloat), ""}, // above LDBL_MAX
			{"HSET h m 1.1e4932", hzI(1), ""},
			{"HINCRBYFLOAT h m 1e4932", hzE(kv.ErrNaN), ""},
		},
		"token bucket in a hash": {
			{"HMGET tb tokens ts", hzA(hzNil, hzNil), hzA(hzNil3, hzNil3)},
			{"HSET tb tokens 9 ts 1700000000000", hzI(2), ""},
			{"HMGET tb tokens ts", hzBs("9", "1700000000000"), ""},
			{"HSET tb tokens 8.5 ts 1700000000100", hzI(0), ""},
			{"HMGET tb tokens ts", hzBs("8.5", "1700000000100"), ""},
			{"HINCRBYFLOAT tb tokens -1.5", hzB("7"), ""},
			{"HINCRBY tb ts 250", hzI(1700000000350), ""},
			{"HGETALL tb", hzBs("tokens", "7", "ts", "1700000000350"),
				"%2\r\n" + hzB("tokens") + hzB("7") + hzB("ts") + hzB("1700000000350")},
		},
		"wrongtype with a string and a sorted set": {
			{"SET s x", hzOK, ""},
			{"ZADD z 1 a", hzI(1), ""},
			{"HGET s a", hzWrong, ""}, {"HGET z a", hzWrong, ""},
			{"HMGET s a", hzWrong, ""}, {"HSET z a 1", hzWrong, ""},
			{"HSET s a 1", hzWrong, ""}, {"HMSET s a 1", hzWrong, ""},
			{"HSETNX s a 1", hzWrong, ""}, {"HDEL s a", hzWrong, ""},
			{"HGETALL s", hzWrong, ""}, {"HKEYS z", hzWrong, ""}, {"HVALS z", hzWrong, ""},
			{"HEXISTS s a", hzWrong, ""}, {"HLEN z", hzWrong, ""}, {"HSTRLEN s a", hzWrong, ""},
			{"HINCRBY s a 1", hzWrong, ""}, {"HINCRBY s a x", hzE(kv.ErrNotInteger), ""},
			{"HINCRBYFLOAT z a 1", hzWrong, ""}, {"HINCRBYFLOAT z a x", hzE(kv.ErrNotFloat), ""},
			{"HSET s a", wrongArgs("hset"), ""},
		},
	}
	for name, steps := range tables {
		hzRun(t, name, steps)
	}
}

// hzHuge is HINCRBYFLOAT's reply for 1e4000: the long double nearest
// 1e4000, printed whole (as Redis 7.0 prints it).
func hzHuge() string {
	const want = "9999999999999999999965463873099623784932492583506957631301508333043261943306342355481821641865509279862764452073123673540217602217367592344172125881950527999961428582434354754501870958214290741301143014670445026260849443456275333742340822559146220440774502699147116818307775566773571206492036312963397368761826079538161612036724681027980418945071857333802019573184376407974737742100582963439581302474746605828071068162266095350249109360981931695942123253872362355720717867859931997116967823535175344886417435948827492668424224514931596965124928426557313007272003654181606637829648718026332623445964659599411688673612401217012598120557489288735334437118479345590827013160426634334036145971611294094499267930097645158316924242084444005046275789316854264698962537519604804648202558831813320199082274810678546966662106272497006996186529202046612197927965030663016053612055682060855170989021069998476304668166868798327849305544516958630545705436267868123963090419840720786295093297923233166989307185493468005963513556052273926524815064535863034951177115665985606171666708242756198962303861871354719181381961379671761938984704505073921618907144272449828915839083978037993280452559586965504199368256134650271468844247174823646278663567437132739306516943311285144568895817811521270234335023202809923439313537168685792314272771667847310402459453149183490692769538329516243242927105447175974956565949859259880257266623432431660986751258600816348320837727852352371818896648343700947852991058969433541705132345122524048434688325138322933085183721655672137865396358471035067214167360617119527605272354771447437560932908789355181041081978971762346557568230767574027302293460544968752081768656824879994376355163920300385095919688678670907760987187661793434717175760350651419537956103182910121364884637262102263204295329279620360536203761315194554053188934218409316246410738656203852138992492444404026342210499619140876855921277988778676947892152806854950785068014727125536739702656962611964401436187934885803420611286745134838665415365691409110464038694668899344879845822942763373039719688602810444439928037135468898274565353630059446256169978689065593420848456038274366567225299549352683650770160551908116011723880315176381390821744087191159014840466408422036463264182928434780181167746977398743042449413105215463884123801578726746967721334558724520471115335862516435283282393832140500259762370795907195418122260308331006030210104962511689458912869480521025430134047382228141350554394390210188326863538753083190329578149617392735325345607293804019789613107204439729055324106921126322671020066709317012835936925695594694910121291991133040352454029415895421330627924576068200470892536792435143079137382774440346196002593999683669353176553680054317921648423581639781664231716459539510456753265337998256664529200852939049468855419289097785303294946449752258791882954794558753338748235175173730073178466259683916437044889075282877916869627991289792183586849679291189074136405526988632104737613205959150473631599616592564842952439858033179702368199753306698362201401506479407699236396521519654661597132309737381973903141889548031713181771968965861360007055846791276712592611475612847974647898601585527666227738929689128212619681144409905588974943980927948431950098268346459649230305689978542029932792436486452896735925004194782587516473457624352639480090109507295735020460456725638145957022317397784209033998721254961060890916634094880983552750508881669349308347772834504388303087113341878104141612215788330206835981183895501665502020020640589210848902416003156361626873160836225566347750269512599746786860171326806831029087653660341164708808802454022881699049392139574016756146192644415820839590797897050551922334947406004738872332042844089285302334417905996381190171610168845316435533461235902086067935935005063001450522174581772443096538389199989128731679326545348278957788061762018807017602515186853205589875909910708079333605047010115738478105476750550150020629864357825543441956972190272729951206648276349901340672"
	return hzB(want)
}

// TestHashLimiterWrongType: every hash command on a limiter key is
// WRONGTYPE, and the limiter's state is left alone.
func TestHashLimiterWrongType(t *testing.T) {
	for _, resp3 := range []bool{false, true} {
		h := newHZEnv(t)
		h.limiter("lim")
		for _, line := range []string{"HGET lim a", "HMGET lim a", "HSET lim a 1", "HMSET lim a 1", "HSETNX lim a 1",
			"HDEL lim a", "HGETALL lim", "HKEYS lim", "HVALS lim", "HEXISTS lim a", "HLEN lim", "HSTRLEN lim a",
			"HINCRBY lim a 1", "HINCRBYFLOAT lim a 1"} {
			if got := h.do(resp3, line); got != hzWrong {
				t.Errorf("%s: %q", line, got)
			}
		}
	}
}

// TestHashLimits: a field or value over values.MaxValueLen, or a field
// beyond values.MaxElements, is refused and nothing changes, even for the
// pairs of the same command that fit.
func TestHashLimits(t *testing.T) {
	h := newHZEnv(t)
	long := strings.Repeat("x", values.MaxValueLen+1)
	fits := strings.Repeat("y", values.MaxValueLen)
	tooLong, tooMany := hzE(kv.ErrTooLong), hzE(kv.ErrTooMany)
	do := func(want string, args ...string) {
		t.Helper()
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		if got := h.doArgs(false, b); got != want {
			if len(got) > 80 {
				got = got[:80]
			}
			t.Errorf("%.40q: got %q want %.80q", args, got, want)
		}
	}
	do(tooLong, "HSET", "h", "a", "1", "b", long)
	do(tooLong, "HSET", "h", long, "1")
	do(hzI(0), "HLEN", "h") // not created
	do(hzI(1), "HSET", "h", "a", fits)
	do(tooLong, "HSET", "h", "a", "2", "c", long)
	do(hzB(fits), "HGET", "h", "a")
	do(hzI(1), "HLEN", "h")
	do(tooLong, "HMSET", "h", "a", long)
	do(tooLong, "HSETNX", "h", "n", long)
	do(hzI(0), "HEXISTS", "h", "n")
	do(tooLong, "HINCRBY", "h2", long, "1")
	do(tooLong, "HINCRBYFLOAT", "h2", long, "1")
	do(hzI(0), "HLEN", "h2")

	// MaxElements in one command: refused whole.
	args := []string{"HSET", "big"}
	for i := range values.MaxElements + 1 {
		args = append(args, "f"+strconv.Itoa(i), "v")
	}
	do(tooMany, args...)
	do(hzI(0), "HLEN", "big")
	// Duplicates count once.
	dup := append([]string{}, args[:2*values.MaxElements+2]...)
	dup = append(dup, "f0", "w")
	do(hzI(values.MaxElements), dup...)
	do(hzI(values.MaxElements), "HLEN", "big")
	do(tooMany, "HSET", "big", "f0", "x", "new", "x")
	do(tooMany, "HSETNX", "big", "new", "x")
	do(tooMany, "HINCRBY", "big", "new", "1")
	do(tooMany, "HINCRBYFLOAT", "big", "new", "1")
	do(hzB("w"), "HGET", "big", "f0")
	do(hzI(0), "HSET", "big", "f0", "x", "f1", "0") // existing fields still change
	do(hzI(1), "HINCRBY", "big", "f1", "1")
	do(hzI(1), "HDEL", "big", "f3")
	do(hzI(1), "HSET", "big", "new", "x")
	do(hzI(values.MaxElements), "HLEN", "big")
}
