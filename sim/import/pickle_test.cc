// The native pickle reader (sim/import/pickle.h): each opcode family, the
// JSON it writes (as tools/snapshot_to_json.py --keep-frames wrote it),
// CPython's own pickles at protocols 2 to 5 (tests/data/pickle/, made by
// make_pickles.py there), every class opcode refused, and hostile inputs
// (truncated, bad memo, bombs, huge lengths) refused naming a byte offset.
#include "sim/import/pickle.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "sim/import/snapshot.h"

namespace gpusim::import_internal::pickle_test {
namespace {

// Bytes from a literal holding NULs.
template <size_t N>
std::string B(const char (&s)[N]) {
  return std::string(s, N - 1);
}

// The JSON of `pickle`, or "ERROR: message".
std::string Json(const std::string& pickle) {
  auto p = PlainPickle::Read(pickle, "t.pickle");
  if (!p.ok()) return "ERROR: " + std::string(p.status().message());
  std::string out;
  absl::Status st = (*p)->WriteJson(&out);
  if (!st.ok()) return "ERROR: " + std::string(st.message());
  return out;
}

// {"v": <value>} around the opcodes of one value (protocol 4 framing aside).
std::string InDict(const std::string& value_ops) { return B("\x80\x04}\x8c\x01v") + value_ops + "s."; }
std::string V(const std::string& value_ops) { return Json(InDict(value_ops)); }

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

#define EXPECT_ERROR(got, text) EXPECT_NE((got).find(text), std::string::npos) << (got)

TEST(Pickle, Integers) {
  EXPECT_EQ(V(B("K\xff")), R"({"v":255})");                 // BININT1, unsigned
  EXPECT_EQ(V(B("M\xff\xff")), R"({"v":65535})");            // BININT2, unsigned
  EXPECT_EQ(V(B("J\xff\xff\xff\xff")), R"({"v":-1})");       // BININT, signed
  EXPECT_EQ(V(B("\x8a\x00")), R"({"v":0})");                 // LONG1 of no bytes
  EXPECT_EQ(V(B("\x8a\x01\x80")), R"({"v":-128})");          // two's complement
  EXPECT_EQ(V(B("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\x00")), R"({"v":9223372036854775807})");
  EXPECT_EQ(V(B("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80")), R"({"v":-9223372036854775808})");
  EXPECT_EQ(V(B("\x8b\x02\x00\x00\x00\x01\x00")), R"({"v":1})");  // LONG4
  // 2^63: Python's int, not JSON's: refused where it is written.
  EXPECT_ERROR(V(B("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00")), "byte 6: not a plain-data memory snapshot: an "
                                                                      "integer of 64 bits does not fit in 64 bits");
  EXPECT_ERROR(V(B("\x8b\xff\xff\xff\xff")), "byte 6: LONG4: LONG pickle has negative byte count");
  EXPECT_EQ(V(B("\x88")), R"({"v":true})");
  EXPECT_EQ(V(B("\x89")), R"({"v":false})");
  EXPECT_EQ(V(B("N")), R"({"v":null})");
}

TEST(Pickle, FloatsAsPythonReprWritesThem) {
  auto f = [](const char (&big_endian)[9]) { return V(B("G") + std::string(big_endian, 8)); };
  EXPECT_EQ(f("\x3f\xf8\x00\x00\x00\x00\x00\x00"), R"({"v":1.5})");
  EXPECT_EQ(f("\x43\x41\xc3\x79\x37\xe0\x80\x00"), R"({"v":1e+16})");
  EXPECT_EQ(f("\x43\x0c\x6b\xf5\x26\x34\x00\x00"), R"({"v":1000000000000000.0})");
  EXPECT_EQ(f("\x3e\xe4\xf8\xb5\x88\xe3\x68\xf1"), R"({"v":1e-05})");
  EXPECT_EQ(f("\x3f\x1a\x36\xe2\xeb\x1c\x43\x2d"), R"({"v":0.0001})");
  EXPECT_EQ(f("\x80\x00\x00\x00\x00\x00\x00\x00"), R"({"v":-0.0})");
  EXPECT_EQ(f("\x3f\xd5\x55\x55\x55\x55\x55\x55"), R"({"v":0.3333333333333333})");
  EXPECT_EQ(f("\x00\x00\x00\x00\x00\x00\x00\x01"), R"({"v":5e-324})");
  EXPECT_EQ(f("\x7f\xf8\x00\x00\x00\x00\x00\x00"), R"({"v":null})");  // NaN
  EXPECT_EQ(f("\xff\xf0\x00\x00\x00\x00\x00\x00"), R"({"v":null})");  // -inf
}

TEST(Pickle, StringsAsJsonDumpsEscapesThem) {
  EXPECT_EQ(V(B("\x8c\x03" "a\"b")), R"({"v":"a\"b"})");                    // SHORT_BINUNICODE
  EXPECT_EQ(V(B("X\x02\x00\x00\x00\\\n")), R"({"v":"\\\n"})");           // BINUNICODE
  EXPECT_EQ(V(B("\x8d\x01\x00\x00\x00\x00\x00\x00\x00\x7f")), R"({"v":"\u007f"})");  // BINUNICODE8
  EXPECT_EQ(V(B("\x8c\x03\x00\x1f\t")), R"({"v":"\u0000\u001f\t"})");
  EXPECT_EQ(V(B("\x8c\x05\xc3\xa9\xe2\x82\xac")), R"({"v":"\u00e9\u20ac"})");
  EXPECT_EQ(V(B("\x8c\x04\xf0\x9f\x98\x80")), R"({"v":"\ud83d\ude00"})");  // a surrogate pair
  EXPECT_EQ(V(B("\x8c\x03\xed\xa0\x80")), R"({"v":"\ud800"})");  // "surrogatepass", as BINUNICODE reads
  EXPECT_ERROR(V(B("\x8c\x02\xc0\x80")), "byte 6: SHORT_BINUNICODE: 'utf-8' codec can't decode byte 0xc0");
  EXPECT_EQ(V(B("U\x02ok")), R"({"v":"ok"})");  // SHORT_BINSTRING: ASCII
  EXPECT_ERROR(V(B("T\x01\x00\x00\x00\xe9")), "BINSTRING: 'ascii' codec can't decode byte 0xe9");
}

TEST(Pickle, Containers) {
  EXPECT_EQ(V(B(")")), R"({"v":[]})");
  EXPECT_EQ(V(B("K\x01\x85")), R"({"v":[1]})");
  EXPECT_EQ(V(B("K\x01K\x02\x86")), R"({"v":[1,2]})");
  EXPECT_EQ(V(B("K\x01K\x02K\x03\x87")), R"({"v":[1,2,3]})");
  EXPECT_EQ(V(B("(K\x01K\x02K\x03K\x04t")), R"({"v":[1,2,3,4]})");  // MARK ... TUPLE
  EXPECT_EQ(V(B("]K\x01" "a(K\x02K\x03" "e")), R"({"v":[1,2,3]})");        // APPEND, APPENDS
  EXPECT_EQ(V(B("(K\x01l")), R"({"v":[1]})");                        // MARK ... LIST
  EXPECT_EQ(V(B("}\x8c\x01" "aK\x01s(\x8c\x01" "bK\x02u")), R"({"v":{"a":1,"b":2}})");
  EXPECT_EQ(V(B("(\x8c\x01" "aK\x01" "d")), R"({"v":{"a":1}})");  // MARK ... DICT
  EXPECT_EQ(V(B("}(e")), R"({"v":{}})");                    // an empty APPENDS is no append
  // Keys as json.dumps(key) writes them; equal keys merge as in a Python
  // dict (first key, last value), then equal texts as in the JSON's dict.
  EXPECT_EQ(V(B("}(K\x01\x8c\x01" "a\x88\x8c\x01" "bNK\x00\x89K\x02u")), R"({"v":{"1":"b","null":0,"false":2}})");
  EXPECT_EQ(V(B("}(K\x01K\x01\x8c\x01" "1K\x02u")), R"({"v":{"1":2}})");
  EXPECT_EQ(V(B("}(G\x3f\xf8\x00\x00\x00\x00\x00\x00K\x01G\x7f\xf8\x00\x00\x00\x00\x00\x00K\x02u")),
            R"({"v":{"1.5":1,"NaN":2}})");
  // An infinite key (once undefined behaviour: pickle_fuzzer's regression
  // infinity_key_ubsan.pickle).
  EXPECT_EQ(V(B("}(G\x7f\xf0\x00\x00\x00\x00\x00\x00K\x01G\xff\xf0\x00\x00\x00\x00\x00\x00K\x02u")),
            R"({"v":{"Infinity":1,"-Infinity":2}})");
  EXPECT_ERROR(V(B("}()K\x01u")), "byte 8: not a plain-data memory snapshot: unsupported dict key type tuple");
  EXPECT_ERROR(V(B("}(]K\x01u")), "byte 11: SETITEMS: unhashable type: 'list'");
  // SETITEM on a list is list.__setitem__ (do_setitems).
  EXPECT_EQ(V(B("](K\x01K\x02" "eK\x00K\x09s")), R"({"v":[9,2]})");
  EXPECT_ERROR(V(B(")K\x01" "a")), "APPEND: 'tuple' object has no attribute 'append'");
}

TEST(Pickle, MemoSharesOneValue) {
  // BINPUT/BINGET, LONG_BINPUT/LONG_BINGET, MEMOIZE (index = entries so far).
  EXPECT_EQ(V(B("]q\x07K\x01" "ah\x07\x86")), R"({"v":[[1],[1]]})");
  EXPECT_EQ(V(B("]r\x00\x01\x00\x00K\x01" "aj\x00\x01\x00\x00\x86")), R"({"v":[[1],[1]]})");
  EXPECT_EQ(V(B("K\x07q\x05" "0K\x08\x94h\x01\x86")), R"({"v":[8,8]})");
  // A list holding itself nests without end: refused at the nesting bound.
  EXPECT_ERROR(V(B("]\x94h\x00" "a")), "values nested deeper than 1000 levels");
  EXPECT_ERROR(V(B("h\x03")), "byte 6: BINGET: memo value not found at index 3");
  EXPECT_ERROR(V(B("j\xff\xff\xff\xff")), "byte 6: LONG_BINGET: memo value not found at index 4294967295");
}

TEST(Pickle, StackAndMarks) {
  EXPECT_EQ(V(B("K\x01K\x02" "0")), R"({"v":1})");        // POP
  EXPECT_EQ(V(B("K\x01(K\x02K\x03" "1")), R"({"v":1})");  // POP_MARK
  EXPECT_EQ(V(B("K\x01(0")), R"({"v":1})");            // POP of a mark
  EXPECT_EQ(V(B("]2K\x01" "a\x86")), R"({"v":[[1],[1]]})");  // DUP: the same list twice
  EXPECT_ERROR(Json(B("\x80\x04.")), "t.pickle: byte 2: STOP: unpickling stack underflow");
  EXPECT_ERROR(Json(B("\x80\x04K\x01(.")), "t.pickle: byte 5: STOP: unexpected MARK found");
  EXPECT_ERROR(Json(B("\x80\x04" "e")), "byte 2: APPENDS: could not find MARK");
  EXPECT_ERROR(Json(B("\x80\x04}(K\x01u.")), "byte 6: SETITEMS: odd number of items for SETITEMS");
  // Values left under the one STOP takes, and bytes after STOP, are ignored.
  EXPECT_EQ(Json(B("\x80\x04K\x01}.garbage")), "{}");
}

TEST(Pickle, ProtoAndFrame) {
  EXPECT_EQ(Json(B("}.")), "{}");  // no PROTO: protocol 1's binary opcodes read the same
  EXPECT_EQ(Json(B("\x80\x05\x95\x02\x00\x00\x00\x00\x00\x00\x00}.")), "{}");
  EXPECT_ERROR(Json(B("\x80\x06}.")), "t.pickle: byte 0: PROTO: unsupported pickle protocol 6");
  EXPECT_ERROR(Json(B("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}.")),
               "byte 2: FRAME: a frame of 16 bytes runs past the end of the file (2 bytes left; truncated file?)");
  // Note [Pickle reads]: a read past a frame's end continues after it, as
  // pickle.load of a file does (770 = 0x0302, the frame's 0x01 skipped).
  EXPECT_EQ(Json(B("\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00}\x8c\x01vM\x01\x02\x03s.")), R"({"v":770})");
}

TEST(Pickle, CPythonPicklesAtProtocols2To5) {
  const std::string dir = GPUSIM_SOURCE_DIR "/tests/data/pickle/";
  const std::string want = ReadFile(dir + "roundtrip.json");
  ASSERT_FALSE(want.empty());
  for (int proto = 2; proto <= 5; ++proto) {
    const std::string pickle = ReadFile(dir + "roundtrip_p" + std::to_string(proto) + ".pickle");
    ASSERT_EQ(static_cast<unsigned char>(pickle[1]), proto);
    EXPECT_EQ(Json(pickle), want) << "protocol " << proto;
  }
}

TEST(Pickle, EveryClassOpcodeIsRefusedByName) {
  const struct {
    std::string ops;
    const char* name;
  } cases[] = {
      {B("cos\nsystem\n"), "byte 2: GLOBAL: names os.system: refused"},
      {B("\x8c\x0b" "collections\x8c\x0bOrderedDict\x93"), "byte 28: STACK_GLOBAL: names collections.OrderedDict: refused"},
      {B("N)R"), "byte 4: REDUCE: refused"},
      {B("}}b"), "byte 4: BUILD: refused"},
      {B("N)\x81"), "byte 4: NEWOBJ: refused"},
      {B("N)}\x92"), "byte 5: NEWOBJ_EX: refused"},
      {B("(ios\nsystem\n"), "byte 3: INST: refused"},
      {B("(No"), "byte 4: OBJ: refused"},
      {B("P0\n"), "byte 2: PERSID: refused"},
      {B("NQ"), "byte 3: BINPERSID: refused"},
      {B("\x82\x01"), "byte 2: EXT1: refused"},
      {B("\x83\x01\x00"), "byte 2: EXT2: refused"},
      {B("\x84\x01\x00\x00\x00"), "byte 2: EXT4: refused"},
  };
  for (const auto& c : cases) {
    const std::string got = Json(B("\x80\x04") + c.ops + ".");
    EXPECT_ERROR(got, c.name);
    EXPECT_ERROR(got, "a memory snapshot holds only plain values");
  }
}

TEST(Pickle, OtherValuesAreRefusedWhereWritten) {
  EXPECT_ERROR(V(B("C\x02" "ab")), "byte 6: not a plain-data memory snapshot: unsupported value type bytes");
  EXPECT_ERROR(V(B("\x96\x01\x00\x00\x00\x00\x00\x00\x00" "a")), "unsupported value type bytearray");
  EXPECT_ERROR(V(B("\x96\x01\x00\x00\x00\x00\x00\x00\x00" "a\x98")), "unsupported value type memoryview");
  EXPECT_ERROR(V(B("\x8f(K\x01\x90")), "unsupported value type set");
  EXPECT_ERROR(V(B("(K\x01\x91")), "unsupported value type frozenset");
  EXPECT_ERROR(Json(B("\x80\x04]K\x01" "a.")), "t.pickle: byte 2: expected a dict at the top level, got list");
  // Values popped off never reach the JSON: no error.
  EXPECT_EQ(Json(B("\x80\x04" "C\x01x0}.")), "{}");
  EXPECT_ERROR(Json(B("\x80\x04I1\n.")), "byte 2: INT: a protocol 0 text opcode");
  EXPECT_ERROR(Json(B("\x80\x05\x97.")), "byte 2: NEXT_BUFFER: pickle stream refers to out-of-band data");
  EXPECT_ERROR(Json(B("\x80\x04\xff.")), "t.pickle: byte 2: 0xff is not a pickle opcode");
}

TEST(Pickle, TruncatedAtEveryByte) {
  const std::string whole = ReadFile(GPUSIM_SOURCE_DIR "/tests/data/pickle/roundtrip_p4.pickle");
  ASSERT_GT(whole.size(), 1000u);
  for (size_t n = 0; n < whole.size(); ++n) {
    const std::string got = Json(whole.substr(0, n));
    ASSERT_EQ(got.rfind("ERROR: t.pickle: byte ", 0), 0u) << n << ": " << got;
  }
  EXPECT_ERROR(Json(""), "t.pickle: byte 0: empty file, expected a pickle");
  EXPECT_ERROR(Json(B("\x80\x04}")), "t.pickle: byte 3: the file ends before the pickle's STOP opcode");
  EXPECT_ERROR(Json(B("\x80\x04J\x01\x00")), "byte 2: BININT: the file ends inside its 4-byte argument");
}

// Length fields are checked against the bytes left before anything is
// allocated; a memo index is no allocation size.
TEST(Pickle, HugeLengthsAllocateNothing) {
  EXPECT_ERROR(Json(B("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x80" "abcdefg.")),
               "t.pickle: byte 2: BINUNICODE8: a string of 9223372036854775808 bytes runs past the end of the file");
  EXPECT_ERROR(Json(B("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xff.")), "BINBYTES8: a bytes value of");
  EXPECT_ERROR(Json(B("\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\x7f.")), "BYTEARRAY8: a bytes value of");
  EXPECT_ERROR(Json(B("\x80\x04\x8b\xff\xff\xff\x7f.")), "LONG4: an integer of 2147483647 bytes runs past");
  EXPECT_ERROR(Json(B("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff}.")), "FRAME: a frame of");
  EXPECT_ERROR(Json(B("\x80\x04X\xff\xff\xff\xff" "abc.")), "BINUNICODE: a string of 4294967295 bytes");
  // LONG_BINPUT 2^32 - 1 (CPython's memo array would grow to 2^33 entries).
  EXPECT_EQ(Json(B("\x80\x04}r\xff\xff\xff\xff" "0j\xff\xff\xff\xff.")), "{}");
}

// Note [Pickle bounds]: the memo's shared references, nested, expand
// exponentially: refused past 4 values per byte (+100,000), as
// snapshot_to_json.py refused them.
TEST(Pickle, ExpansionBombIsRefused) {
  // x = [1]; 60 times x = [x, x]: 2^61 values in ~300 bytes.
  std::string ops = B("]K\x01" "a\x94" "0");
  for (int i = 0; i < 60; ++i) ops += B("h") + static_cast<char>(i) + B("h") + static_cast<char>(i) + B("\x86\x94" "0");
  ops += B("h<");  // memo entry 60
  const std::string got = V(ops);
  EXPECT_ERROR(got, "it expands to far more values than its size allows");
  // Just under and just over the budget: a list of n references to a list
  // of 10 ints, 11 n + 2 values against 4 * size + 100000.
  auto shared = [](int n) {
    std::string p = B("\x80\x04}\x8c\x01v](K\x00K\x01K\x02K\x03K\x04K\x05K\x06K\x07K\x08K\x09" "e\x94" "0](");
    for (int i = 0; i < n; ++i) p += B("h\x00");
    return p + "es.";
  };
  // 2 n + 36 bytes: 11 n + 2 <= 4 (2 n + 36) + 100000 up to n = 33380.
  EXPECT_EQ(Json(shared(33380)).rfind("{\"v\":[", 0), 0u);
  EXPECT_ERROR(Json(shared(33381)), "it expands to far more values than its size allows");
}

TEST(Pickle, LongSharedStringIsBoundedByTextSize) {
  // One 16 KiB string referenced 100,000 times: 1.6 GB of JSON, though
  // only 100,002 values.
  std::string p = B("\x80\x04}\x8c\x01v\x8d") + std::string("\x00\x40\x00\x00\x00\x00\x00\x00", 8) +
                  std::string(16384, 'x') + B("\x94" "0](");
  for (int i = 0; i < 100000; ++i) p += B("h\x00");
  p += "es.";
  EXPECT_ERROR(Json(p), "bytes of JSON, more than its size allows");
}

// Note [Writing shared values once]: a shared value's text is copied, yet
// the bounds hold where it is copied to, and errors name the same value.
TEST(Pickle, SharedValuesKeepTheBounds) {
  // L: 600 nested lists (the outermost at byte 6), shared; then (L, D)
  // with D 450 lists around L: L's innermost lists end up past 1,000 levels
  // the second time only, the first past the bound 548 levels into L.
  std::string ops = std::string(600, ']') + std::string(599, 'a') + B("\x94") + std::string(450, ']') + B("h\x00") +
                    std::string(450, 'a') + B("\x86");
  EXPECT_ERROR(V(ops), "t.pickle: byte 554: not a plain-data memory snapshot: values nested deeper than 1000 levels");
  // The copies read as the first.
  EXPECT_EQ(V(B("]K\x01K\x02\x86" "a\x94h\x00h\x00\x87")), R"({"v":[[[1,2]],[[1,2]],[[1,2]]]})");
}

TEST(Pickle, DepthBombIsRefused) {
  std::string ops;
  for (int i = 0; i < 5000; ++i) ops += "]";
  for (int i = 0; i < 4999; ++i) ops += "a";
  const std::string got = V(ops);
  EXPECT_ERROR(got, "values nested deeper than 1000 levels");
  EXPECT_ERROR(got, "t.pickle: byte ");
}

// Errors the snapshot reader finds in the values name the pickle offset of
// the value at fault (Note [Pickle offsets], snapshot.cc).
TEST(Pickle, SnapshotErrorsNameThePickleOffset) {
  const std::string path = testing::TempDir() + "/bad_size.pickle";
  {
    // {'segments': [{'total_size': 'x'}]} at protocol 4.
    std::ofstream f(path, std::ios::binary);
    f << B("\x80\x04}\x8c\x08segments](}\x8c\x0atotal_size\x8c\x01xses.");
  }
  auto s = LoadSnapshot(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), path + ": byte 28: \"total_size\": expected an integer");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpusim::import_internal::pickle_test
