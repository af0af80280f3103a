// Point values, canonical JSON round trip, and SHA-256 against the FIPS 180-4 vectors.
#include <limits>

#include <gtest/gtest.h>

#include "harness/core/check.h"
#include "harness/core/sha256.h"
#include "harness/spec/point.h"

namespace sb {
namespace {

TEST(Sha256, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  // Split across the 55/56/64-byte padding boundaries.
  std::string msg(200, 'x');
  for (std::size_t i = 0; i < msg.size(); ++i) msg[i] = char('a' + i % 26);
  for (std::size_t cut : {0, 1, 55, 56, 63, 64, 65, 119, 120, 200}) {
    Sha256 h;
    h.update(msg.substr(0, cut));
    h.update(msg.substr(cut));
    EXPECT_EQ(h.hex(), sha256_hex(msg)) << "cut at " << cut;
  }
}

Point sample() {
  Point p;
  p.set("b", true);
  p.set("i", std::int64_t{-42});
  p.set("big", std::numeric_limits<std::int64_t>::max());
  p.set("f_int", 600.0);  // integral float must stay a float
  p.set("f_tenth", 0.1);
  p.set("f_tiny", 1e-300);
  p.set("s", std::string("quote\" back\\ tab\t unicode \xc3\xa9"));
  p.set("a.dotted.key", std::string("x"));
  return p;
}

TEST(Canonical, SortedKeysTypedValues) {
  EXPECT_EQ(sample().canonical(),
            R"({"a.dotted.key":"x","b":true,"big":9223372036854775807,"f_int":600.0,)"
            R"("f_tenth":0.1,"f_tiny":1e-300,"i":-42,"s":"quote\" back\\ tab\t unicode )"
            "\xc3\xa9\"}");
}

TEST(Canonical, RoundTripIsExact) {
  Point p = sample();
  Point q = Point::from_canonical(p.canonical());
  EXPECT_EQ(q.values(), p.values());  // same keys, same variant alternatives, same bits
  EXPECT_EQ(q.canonical(), p.canonical());
  EXPECT_TRUE(std::holds_alternative<double>(q.get("f_int")));
  EXPECT_TRUE(std::holds_alternative<std::int64_t>(q.get("i")));
}

TEST(Canonical, RejectsNonObjectsAndNestedValues) {
  EXPECT_THROW(Point::from_canonical("[1, 2]"), Error);
  EXPECT_THROW(Point::from_canonical("{not json"), Error);
  try {
    Point::from_canonical(R"({"x": [1]})");
    FAIL() << "nested value accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'x' has a array value"), std::string::npos) << e.what();
  }
}

TEST(Point, TypedGettersSayWhatIsWrong) {
  Point p = sample();
  p.name = "demo";
  EXPECT_EQ(p.get_int("i"), -42);
  EXPECT_EQ(p.get_double("i"), -42.0);  // ints widen
  EXPECT_EQ(p.get_double("f_tenth"), 0.1);
  EXPECT_TRUE(p.get_bool("b"));
  EXPECT_EQ(p.get_string("a.dotted.key"), "x");
  try {
    p.get_int("f_int");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("point 'demo': key 'f_int' is a float (600.0), not an int"),
              std::string::npos) << e.what();
  }
  try {
    p.get("missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("point 'demo' has no key 'missing'"), std::string::npos);
  }
}

TEST(Point, SourcePositions) {
  Point p;
  p.set("world", std::int64_t{2}, SourcePos{"s.toml", 3, 9});
  p.set("seed", std::int64_t{1});
  EXPECT_EQ(p.where("world").str(), "s.toml:3:9");
  EXPECT_EQ(p.where("seed").str(), "(default)");
  EXPECT_EQ(value_to_string(Value{0.25}), "0.25");
  EXPECT_EQ(value_to_string(Value{false}), "false");
}

// Ranks that expanded a point differently ("auto" chosen on unlike nodes) are named with the
// keys that differ and both values; alike ranks give "".
TEST(Point, DisagreementNamesTheKeysAndRanks) {
  Point a, b;
  a.set("strategy", std::string("full_shard"));
  a.set("seq_chunks", std::int64_t{8});
  b = a;
  EXPECT_EQ(Point::disagreement({a.canonical(), a.canonical(), a.canonical()}), "");
  b.set("strategy", std::string("no_shard"));
  b.set("offload_optimizer", std::string("disk"));
  EXPECT_EQ(Point::disagreement({a.canonical(), a.canonical(), b.canonical()}),
            "strategy: \"full_shard\" on rank 0, \"no_shard\" on rank 2; "
            "offload_optimizer: unset on rank 0, \"disk\" on rank 2");
  EXPECT_EQ(Point::disagreement({a.canonical()}), "");
}

}  // namespace
}  // namespace sb
