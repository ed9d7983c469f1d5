#include "frontend/process/walk_render.hpp"
#include "frontend/base/out.hpp"
#include "frontend/base/render.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>

namespace lrcli {

namespace {

constexpr size_t kBlockRows = 256;       // text rows that size the columns
constexpr size_t kFlushBytes = 1 << 18;  // output is written in blocks of this size

void json_string(fmt::memory_buffer& b, std::string_view s) {
  // Most strings are plain ASCII: no escaping and no UTF-8 repair needed.
  bool plain = std::all_of(s.begin(), s.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (plain) {
    b.push_back('"');
    b.append(s);
    b.push_back('"');
    return;
  }
  // Invalid UTF-8 from target memory becomes U+FFFD, as in every JSON output.
  std::string d = json_text(nlohmann::json(std::string(s)), -1);
  b.append(d);
}

// The same JSON as value_json (show, profile), written without a DOM.
void json_value(fmt::memory_buffer& b, const lr::FieldValue& v) {
  using K = lr::FieldValue::Kind;
  auto it = std::back_inserter(b);
  switch (v.kind) {
    case K::kSigned:
      fmt::format_to(it, "{}", v.s);
      return;
    case K::kUnsigned:
      fmt::format_to(it, "{}", v.u);
      return;
    case K::kBool:
      b.append(std::string_view(v.u ? "true" : "false"));
      return;
    case K::kPointer:
      fmt::format_to(it, "\"{:#x}\"", v.u);
      return;
    case K::kEnum:
      if (v.text.empty())
        fmt::format_to(it, "{}", v.s);
      else
        json_string(b, v.text);
      return;
    case K::kString:
    case K::kUuid:
      json_string(b, v.text);
      return;
    default:
      b.append(json_text(value_json(v), -1));
  }
}

// "0x7f..." without fmt's format-string parsing: every row has one.
// Two hex digits per step from a 512-byte table: a row per object makes
// this the text output's inner loop.
std::string_view hex_addr(uint64_t v, char (&tmp)[20]) {
  static constexpr auto kPairs = [] {
    std::array<char, 512> t{};
    for (int i = 0; i < 256; ++i) {
      t[2 * i] = "0123456789abcdef"[i >> 4];
      t[2 * i + 1] = "0123456789abcdef"[i & 15];
    }
    return t;
  }();
  char* end = tmp + sizeof tmp;
  char* p = end;
  while (v > 15) {
    p -= 2;
    std::memcpy(p, &kPairs[2 * (v & 255)], 2);
    v >>= 8;
  }
  if (v || p == end) *--p = "0123456789abcdef"[v];
  *--p = 'x';
  *--p = '0';
  return {p, static_cast<size_t>(end - p)};
}

// Spaces appended a run at a time (push_back per space was a fifth of the
// text output's time).
void pad(fmt::memory_buffer& b, size_t n) {
  static constexpr char kSpaces[] = "                                ";
  while (n) {
    size_t k = std::min(n, sizeof kSpaces - 1);
    b.append(kSpaces, kSpaces + k);
    n -= k;
  }
}

void put_left(fmt::memory_buffer& b, std::string_view s, size_t w) {
  b.append(s);
  if (s.size() < w) pad(b, w - s.size());
}

void put_right(fmt::memory_buffer& b, std::string_view s, size_t w) {
  if (s.size() < w) pad(b, w - s.size());
  b.append(s);
}

}  // namespace

WalkRenderer::WalkRenderer(const WalkArgs& a, const lr::WalkSpec& spec, WalkFormat f,
                           size_t group_idx, const std::string& source, Out& out)
    : a_(a), spec_(spec), f_(f), group_idx_(group_idx), source_(source), out_(out) {}

void WalkRenderer::begin() {
  if (begun_ || f_ == WalkFormat::kText) return;
  begun_ = true;
  nlohmann::json h{
      {"schema", "leakref.walk/1"},
      {"core", source_},
      {"head", spec_.head},
      {"member", spec_.member},
      {"refcount_field",
       spec_.refcount.empty() ? nlohmann::json(nullptr) : nlohmann::json(spec_.refcount)},
      {"where", a_.where.empty() ? nlohmann::json(nullptr) : nlohmann::json(a_.where)}};
  std::string s = json_text(h, -1);
  if (f_ == WalkFormat::kJsonl) {
    s.insert(1, "\"record\":\"walk\",");
    out_.put(s + "\n");
  } else {
    s.pop_back();  // the object stays open: "objects" streams into it
    out_.put(s + ",\"objects\":[\n");
  }
}

void WalkRenderer::object(const lr::WalkedObject& o) {
  if (group_idx_ != SIZE_MAX && o.fields.size() > group_idx_) {
    std::string key;
    for (size_t i = group_idx_; i < o.fields.size(); ++i)
      key += (i == group_idx_ ? "" : ", ") + o.fields[i].to_string();
    Group& g = groups_[key];
    ++g.count;
    if (o.has_refcount) g.refs += o.refcount;
  }
  if (a_.summary_only || long_ || out_.failed()) return;
  begin();
  if (f_ == WalkFormat::kText)
    text_row(o);
  else
    json_object(o);
  flush(false);
}

void WalkRenderer::json_object(const lr::WalkedObject& o) {
  char tmp[20];
  if (f_ == WalkFormat::kJsonl)
    buf_.append(std::string_view("{\"record\":\"object\",\"addr\":\""));
  else
    buf_.append(std::string_view(written_ ? ",\n{\"addr\":\"" : "{\"addr\":\""));
  buf_.append(hex_addr(o.addr, tmp));
  buf_.push_back('"');
  ++written_;
  if (!spec_.refcount.empty()) {
    buf_.append(std::string_view(",\"refcount\":"));
    if (o.has_refcount) {
      fmt::format_int n(o.refcount);
      buf_.append(std::string_view(n.data(), n.size()));
    } else {
      buf_.append(std::string_view("null"));
    }
  }
  if (spec_.reconcile) json_reconcile(o);
  const size_t nshow = a_.show.size();
  if (nshow) {
    buf_.append(std::string_view(",\"fields\":{"));
    for (size_t i = 0; i < nshow && i < o.fields.size(); ++i) {
      if (i) buf_.push_back(',');
      json_string(buf_, a_.show[i]);
      buf_.push_back(':');
      json_value(buf_, o.fields[i]);
    }
    buf_.push_back('}');
  }
  buf_.push_back('}');
  if (f_ == WalkFormat::kJsonl) buf_.push_back('\n');
}

// --reconcile: the references found, and how many counted ones nobody holds.
void WalkRenderer::json_reconcile(const lr::WalkedObject& o) {
  auto it = std::back_inserter(buf_);
  if (o.inbound < 0) {
    buf_.append(std::string_view(",\"inbound\":null"));
    return;
  }
  fmt::format_to(it, ",\"inbound\":{},\"inbound_words\":{}", o.inbound, o.inbound_words);
  if (o.has_refcount && o.refcount > o.inbound)
    fmt::format_to(it, ",\"over\":{}", o.refcount - o.inbound);
  if (o.has_refcount && o.refcount <= 0 && o.inbound > 0)
    fmt::format_to(it, ",\"zero_held\":{}", o.inbound);
  if (o.from_leaked) fmt::format_to(it, ",\"from_leaked\":{}", o.from_leaked);
  buf_.append(std::string_view(",\"referrers\":["));
  for (size_t i = 0; i < o.referrers.size(); ++i) {
    const lr::Ref& r = o.referrers[i];
    fmt::format_to(it, "{}{{\"kind\":\"{}\",", i ? "," : "", lr::ref_from_name(r.kind));
    if (r.kind == lr::RefFrom::kRegister)
      fmt::format_to(it, "\"register\":{}", r.from);
    else
      fmt::format_to(it, "\"from\":\"{:#x}\"", r.from);
    if (r.tid) fmt::format_to(it, ",\"tid\":{}", r.tid);
    buf_.push_back('}');
  }
  buf_.push_back(']');
}

std::string WalkRenderer::reconcile_text(const lr::WalkedObject& o) const {
  if (o.inbound < 0) return "- (not a heap object)";
  std::string s = std::to_string(o.inbound);
  // Link words counted once: say how many words stood behind the number.
  if (o.inbound_words != o.inbound) s += fmt::format(" ({} words)", o.inbound_words);
  if (o.has_refcount && o.refcount > o.inbound)
    s += fmt::format("  !! {} counted, held by nothing found", o.refcount - o.inbound);
  if (o.has_refcount && o.refcount <= 0 && o.inbound > 0)
    s += fmt::format("  !! refcount {}, yet held {} time{} (a use after free in waiting)",
                     o.refcount, o.inbound, o.inbound == 1 ? "" : "s");
  if (o.from_leaked)
    s += fmt::format("  !! {} from leaked block{}", o.from_leaked, o.from_leaked == 1 ? "" : "s");
  return s;
}

void WalkRenderer::text_row(const lr::WalkedObject& o) {
  const bool rc = !spec_.refcount.empty();
  const size_t nshow = std::min(a_.show.size(), o.fields.size());
  if (header_done_ && spec_.reconcile) {  // not the hot path: one more column
    std::vector<std::string> r{fmt::format("{:#x}", o.addr)};
    if (rc) r.push_back(o.has_refcount ? std::to_string(o.refcount) : "?");
    for (size_t i = 0; i < nshow; ++i) r.push_back(o.fields[i].to_string());
    r.push_back(reconcile_text(o));
    put_row(r);
    return;
  }
  if (header_done_) {  // the hot path: straight into the output buffer
    char tmp[20];
    std::string_view addr = hex_addr(o.addr, tmp);
    if (!rc && nshow == 0) {
      buf_.append(addr);
      buf_.push_back('\n');
      return;
    }
    if (rc && nshow == 0 && widths_[0] + widths_[1] < 80) {  // addr <= 18, count <= 20 chars
      // Address and refcount only (the common walk): the row is composed in
      // place and appended once.
      char row[128];
      fmt::format_int n(o.refcount);
      std::string_view v = o.has_refcount ? std::string_view(n.data(), n.size()) : "?";
      size_t w0 = std::max(widths_[0], addr.size()) + 2, w1 = std::max(widths_[1], v.size());
      std::memset(row, ' ', w0 + w1 - v.size());
      std::memcpy(row, addr.data(), addr.size());
      std::memcpy(row + w0 + w1 - v.size(), v.data(), v.size());
      row[w0 + w1] = '\n';
      buf_.append(row, row + w0 + w1 + 1);
      return;
    }
    put_left(buf_, addr, widths_[0]);
    buf_.append(std::string_view("  "));
    if (rc) {
      fmt::format_int n(o.refcount);
      put_right(buf_, o.has_refcount ? std::string_view(n.data(), n.size()) : "?", widths_[1]);
      buf_.append(std::string_view(nshow ? "  " : "\n"));
    }
    for (size_t i = 0; i < nshow; ++i) {
      std::string v = o.fields[i].to_string();
      if (i + 1 == nshow) {
        buf_.append(v);
        buf_.push_back('\n');
      } else {
        put_left(buf_, v, widths_[i + 1 + rc]);
        buf_.append(std::string_view("  "));
      }
    }
    return;
  }
  std::vector<std::string> r{fmt::format("{:#x}", o.addr)};
  if (rc) r.push_back(o.has_refcount ? std::to_string(o.refcount) : "?");
  for (size_t i = 0; i < nshow; ++i) r.push_back(o.fields[i].to_string());
  if (spec_.reconcile) r.push_back(reconcile_text(o));
  block_.push_back(std::move(r));
  if (summary_first_) held_addrs_.push_back(o.addr);
  if (block_.size() < kBlockRows) return;
  if (summary_first_)
    long_ = true;  // the rest waits for the summary and the second walk
  else
    flush_block();
}

void WalkRenderer::rest_object(const lr::WalkedObject& o) {
  if (out_.failed()) return;
  if (rest_seen_ < held_addrs_.size()) {
    if (held_addrs_[rest_seen_++] != o.addr) rest_same_ = false;
    return;
  }
  text_row(o);
  flush(false);
}

bool WalkRenderer::finish_rows() {
  flush(true);
  return rest_same_ && rest_seen_ == held_addrs_.size();
}

// One row in the columns' widths: the refcount right-aligned, the last
// column unpadded.
void WalkRenderer::put_row(const std::vector<std::string>& r) {
  auto it = std::back_inserter(buf_);
  for (size_t i = 0; i < r.size(); ++i) {
    bool last = i + 1 == r.size();
    size_t w = i < widths_.size() ? widths_[i] : 0;
    if (!spec_.refcount.empty() && i == 1)
      fmt::format_to(it, "{:>{}}", r[i], w);
    else if (last)
      buf_.append(r[i]);
    else
      fmt::format_to(it, "{:<{}}", r[i], w);
    if (!last) buf_.append(std::string_view("  "));
  }
  buf_.push_back('\n');
}

// The column header and the held rows, once the widths are known (the first
// kBlockRows rows, or all of them when there are fewer).
void WalkRenderer::flush_block() {
  std::vector<std::string> hdr{"ADDR"};
  if (!spec_.refcount.empty()) hdr.push_back("REFCOUNT");
  for (const auto& f : a_.show) hdr.push_back(f);
  if (spec_.reconcile) hdr.push_back("REFERENCES");
  widths_.assign(hdr.size(), 0);
  for (size_t i = 0; i < hdr.size(); ++i) widths_[i] = hdr[i].size();
  for (const auto& r : block_)
    for (size_t i = 0; i < r.size() && i < widths_.size(); ++i)
      widths_[i] = std::max(widths_[i], r[i].size());
  header_done_ = true;
  put_row(hdr);
  for (const auto& r : block_) put_row(r);
  block_.clear();
}

void WalkRenderer::flush(bool force) {
  if (buf_.size() < kFlushBytes && !force) return;
  out_.put(std::string_view(buf_.data(), buf_.size()));
  buf_.clear();
}

namespace {

template <class G>
std::vector<std::pair<std::string, G>> ranked(const std::map<std::string, G>& groups) {
  std::vector<std::pair<std::string, G>> r(groups.begin(), groups.end());
  std::stable_sort(r.begin(), r.end(),
                   [](const auto& x, const auto& y) { return x.second.count > y.second.count; });
  return r;
}

}  // namespace

nlohmann::json WalkRenderer::summary_json(const lr::WalkReport& rep) const {
  const lr::WalkResult& wr = rep.walk;
  nlohmann::json s{{"visited", rep.visited},
                   {"matched", rep.matched},
                   {"unreadable", rep.unreadable_objects},
                   {"stop", lr::walk_stop_name(wr.stop)},
                   {"stop_detail", wr.stop_detail}};
  s["stop_addr"] =
      wr.stop == lr::WalkStop::kEnd ? nlohmann::json(nullptr) : nlohmann::json(hex(wr.stop_addr));
  s["cycle"] = wr.stop == lr::WalkStop::kCycle
                   ? nlohmann::json{{"start", hex(wr.cycle_start)}, {"length", wr.cycle_length}}
                   : nlohmann::json(nullptr);
  auto& h = s["histogram"] = nlohmann::json::object();
  for (const auto& [k, v] : rep.histogram) h[std::to_string(k)] = v;
  if (group_idx_ != SIZE_MAX) {
    auto& g = s["groups"] = nlohmann::json::array();
    for (const auto& [k, v] : ranked(groups_)) {
      nlohmann::json jg{{"value", k}, {"count", v.count}};
      if (!spec_.refcount.empty()) jg["refcount_sum"] = v.refs;
      g.push_back(std::move(jg));
    }
  }
  s["issue_count"] = wr.issue_count;
  auto& iss = s["issues"] = nlohmann::json::array();
  for (const auto& is : wr.issues) iss.push_back({{"addr", hex(is.addr)}, {"what", is.what}});
  if (rep.mode.rfind("hash:", 0) == 0) {
    s["buckets"] = wr.buckets;
    s["empty_buckets"] = wr.empty_buckets;
    s["faulted_buckets"] = wr.faulted_buckets;
    s["longest_chain"] = wr.longest_chain;
  }
  if (rep.mode == "xarray") s["value_entries"] = wr.skipped;
  if (spec_.reconcile) {
    s["over_referenced"] = rep.over_referenced;
    s["zero_referenced"] = rep.zero_referenced;
    s["leaked_held"] = rep.leaked_held;
    s["not_indexed"] = rep.not_indexed;
  }
  // Timing only on request: the same core gives the same output.
  if (a_.stats) s["walk_ns"] = rep.walk_ns;
  return s;
}

void WalkRenderer::text_summary(const lr::WalkReport& rep) {
  const lr::WalkResult& wr = rep.walk;
  out_.print("{}{} walked as {} from {} ({}): {} visited", long_ ? "" : "\n", rep.type_name,
             rep.mode, spec_.head, hex(rep.head_addr), rep.visited);
  if (!a_.where.empty()) out_.print(", {} matched '{}'", rep.matched, a_.where);
  out_.print("\nstopped: {}{}\n", lr::walk_stop_name(wr.stop),
             wr.stop_detail.empty() ? "" : " — " + wr.stop_detail);
  if (rep.mode.rfind("hash:", 0) == 0)
    out_.print("buckets: {} ({} empty, {} unreadable), longest chain {}\n", wr.buckets,
               wr.empty_buckets, wr.faulted_buckets, wr.longest_chain);
  if (rep.mode == "xarray") out_.print("value entries (not objects): {}\n", wr.skipped);
  if (!spec_.refcount.empty()) {
    out_.print("refcount histogram ({}):\n", spec_.refcount);
    for (const auto& [k, v] : rep.histogram) out_.print("  {:>8}: {}\n", k, v);
  }
  if (group_idx_ != SIZE_MAX) {
    std::string by;
    for (const auto& g : a_.group_by) by += (by.empty() ? "" : ", ") + g;
    auto r = ranked(groups_);
    out_.print("grouped by {} ({} distinct):\n", by, r.size());
    for (const auto& [k, v] : r) {
      if (spec_.refcount.empty())
        out_.print("  {:>8}  {}\n", v.count, k);
      else
        out_.print("  {:>8}  refs {:>8}  {}\n", v.count, v.refs, k);
    }
  }
  if (spec_.reconcile) {
    out_.print(
        "reconciled with the references found in memory: {} object{} with a refcount "
        "above them (counted references nobody holds)\n",
        rep.over_referenced, rep.over_referenced == 1 ? "" : "s");
    if (rep.zero_referenced)
      out_.print(
          "  {} object{} with a refcount of 0 that something still points at (a use "
          "after free in waiting)\n",
          rep.zero_referenced, rep.zero_referenced == 1 ? "" : "s");
    if (rep.leaked_held)
      out_.print("  {} object{} held by leaked blocks (kept only as long as the leak)\n",
                 rep.leaked_held, rep.leaked_held == 1 ? "" : "s");
    if (rep.not_indexed)
      out_.print("  {} object{} in no object the reference index holds: not reconciled\n",
                 rep.not_indexed, rep.not_indexed == 1 ? "" : "s");
  }
  if (wr.issue_count) {
    out_.print("issues: {}\n", wr.issue_count);
    for (const auto& is : wr.issues) out_.print("  {}: {}\n", hex(is.addr), is.what);
  }
}

void WalkRenderer::finish(const lr::WalkReport& rep, const std::vector<std::string>& warnings,
                          Out& err) {
  if (f_ == WalkFormat::kText) {
    if (long_) {  // summary first, then the header and the held rows
      print_warnings_text(warnings, err);
      text_summary(rep);
      out_.put("\n");
      flush_block();
      flush(true);
      return;
    }
    if (!a_.summary_only && !header_done_) flush_block();
    flush(true);
    print_warnings_text(warnings, err);
    text_summary(rep);
    return;
  }
  nlohmann::json t{
      {"type", rep.type_name},           {"type_size", rep.type_size},   {"mode", rep.mode},
      {"head_addr", hex(rep.head_addr)}, {"summary", summary_json(rep)}, {"warnings", warnings}};
  std::string s = json_text(t, -1);
  if (f_ == WalkFormat::kJsonl) {
    s.insert(1, "\"record\":\"summary\",");
    buf_.append(s);
  } else {
    buf_.append(std::string_view(written_ ? "\n]," : "],"));
    buf_.append(std::string_view(s).substr(1));
  }
  buf_.push_back('\n');
  flush(true);
}

}  // namespace lrcli
