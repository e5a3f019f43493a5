// SPDX-License-Identifier: MIT
// pmc critical FILE: the costliest nesting path through a profile, after llvm-mca's bottleneck view.
//
// The nesting comes from pmc/profile_reader.hpp's walker (the file streamed, never loaded whole). The graph has
// one node per label. Each time a scope labelled C runs directly inside a scope labelled P, the edge
// P -> C gains C's inclusive value (its cost) and one occurrence; the share of P's calls that contain a C at least
// once is the edge's probability. A node's cost is what its outermost calls carry: its calls at the top of a thread
// plus the costs of its incoming edges. A scope nested in a scope of its own label (recursion, directly or through
// others) adds a recursion edge instead: its value is already inside the outer call's, so counting it again would
// double it.
//
// The costliest path is the calling context (a chain of labels as it ran) whose own self value is largest: where the
// cost is. Contexts are built during the walk (a few lookups per scope) and the choice is one pass over them: a path
// always ran, and its shares of its root never exceed 100 %, as a context runs inside its parent's calls.
#include <pmc/profile_format.hpp>
#include <pmc/profile_reader.hpp>
#include <pmc/report.hpp>

#include "command_line.hpp"
#include "commands.hpp"
#include "profile_cli.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace pmc_tool {

const char* const critical_help = R"(usage: pmc critical [--counter NAME] [--per-thread | --thread N|NAME] [--graph] [--json]
                    [--color WHEN] [--expect-path PATH] FILE

The costliest nesting path through a profile written by pmc::Profiler (PMC_PROFILE=FILE), after
llvm-mca's bottleneck view. The profile becomes a graph with one node per label (not per call)
and an edge PARENT -> CHILD for each nesting seen. Each edge carries:
  cost         the CHILD scopes' inclusive values summed over the times CHILD ran directly inside
               PARENT (in the counter's unit);
  frequency    how many times that happened, and per PARENT call on average;
  probability  the fraction of PARENT's calls that ran CHILD at least once (llvm-mca's
               "interference probability").
A label's cost is the inclusive value of its outermost calls (those at the top of a thread plus its
incoming edges' costs). A root is a label that is outermost on some thread (it may be nested on
another); a sink encloses none.

The costliest path ends where the cost is: of every calling context (a chain of nested labels as
it ran, from a thread's outermost scope down, merged over calls and threads), the one whose own
self value (the cost spent in its last label's own code, not in its children) is largest. So a
label whose self value dominates ends the path even when it has a cheap child, and a path always
ran: every step is a nesting that happened in that chain. It is llvm-mca's bottleneck over the tree
of contexts with each one's self value as a sink: a context's calls run inside its parent's, so its
cost is never more than its parent's, and the smallest step of a chain is its end's self value.
Ties go to the deeper context, then to the path's text, so that on an exact counter
(page-faults, instructions-minus-irqs:u) the path is the same on every run and CI can compare it.
Each step shows its context's cost, its share of the root's (never above 100 %), its share of the
label's cost (a label reached through several chains gets only part of its cost through this
one), how often it ran (frequency, per call of the step above) and the fraction of the step
above's calls that ran it at least once (probability).

Recursion (a label nested in itself, directly or through other labels) is said, with the chain;
a recursive call's value is inside the outer call's, so a label's cost counts it once, at the
outermost call; on the path it is a step of its own (a context that ran). A cycle without
recursion (A inside B in some calls, B inside A in others) is said too.

A program that stopped with scopes open (killed with SIGKILL, or a crash no handler could catch)
leaves their enclosing scopes out of the file: the scopes recorded inside them count as outermost
(roots), what was open is said, and the exit status is 2 (the path is shown, never judged).

Options:
  --counter NAME  Use this recorded counter instead of the primary (the first one). A name
                  without modifiers finds the one recorded with them (cycles: cycles:u).
  --per-thread    One graph and path per thread instead of all threads together.
  --thread N|NAME Only thread N (the profiler's thread number), or the thread named NAME (numbers
                  follow registration order, which changes from run to run; names do not). Of
                  several threads with one name, NAME#K is the K-th by number.
  --graph         Also list every label and every edge.
  --json          One JSON object: the counter ("exact" and "exact_why", by the rule all pmc's
                  profile tools share; "deterministic": exact and the file whole),
                  the problems, and per graph its labels, edges (with any recursion chain) and path
                  ("text": the labels joined by " > ", what CI compares).
  --color WHEN    auto (default: on a terminal, unless NO_COLOR is set), always or never.
  --expect-path PATH
                  For CI: exit status 3 unless the costliest path (of all threads, or of --thread N)
                  is PATH, its labels joined by " > " as printed (or by ';'), e.g. "compile > typeck"
                  (not by '/': a label may contain one).
                  Meant for an exact counter, whose path is the same on every run. With --json,
                  "gate" states it: expect_path (null without the option), path (the costliest,
                  all threads or --thread N; null with --per-thread), verdict ("same", "differs",
                  "not judged" where the file is damaged, "no path expected") and exit_status.
  -h, --help      Show this help.

Exit status: 0 the whole file was read (and the path is PATH, with --expect-path); 2 it was read,
but part of it was lost or corrupt, or scopes were open when its program stopped (what was lost is
said on stderr, or in "problems" and "open_scopes" with --json; 2 comes before 3); 3 with
--expect-path, the path differs (both are said on stderr); 1 it could not be read at all, the
command line was wrong, or the output could not be written.
)";

namespace {

constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

// ---- the label graph ---------------------------------------------------------------------------------------------

struct Edge {
    std::uint32_t from = 0, to = 0;       ///< node indices
    std::uint64_t cost = 0;               ///< the child's inclusive values, summed (non-recursive nestings)
    std::uint64_t count = 0;              ///< non-recursive nestings
    std::uint64_t parent_calls_with = 0;  ///< parent calls that ran the child at least once
    std::uint64_t recursive_count = 0;    ///< nestings in which the child's label was already open above
    std::string recursion_chain;          ///< the first such chain, outermost first: "a -> b -> a"
    bool closes_cycle = false;            ///< a cycle without recursion: not followed by the path
    std::uint32_t next_out = none;        // the parent's next outgoing edge
};

struct Node {
    std::uint32_t label = 0; ///< string id
    std::string name;
    std::uint64_t calls = 0, top_calls = 0;
    std::uint64_t cost = 0;  ///< the outermost calls' inclusive values
    std::int64_t self = 0;   ///< summed self values (inclusive minus the children's inclusive)
    std::uint32_t first_out = none;
    std::uint64_t in_edges = 0; ///< non-recursive incoming edges
};

/// A calling context: one chain of nested labels as it ran, from a thread's outermost scope (or the outermost one the
/// file holds) down, merged over the calls and threads that ran it. Its calls are disjoint intervals nested in its
/// parent's calls, so a context's cost is never more than its parent's, and recursion needs no special case.
struct Context {
    std::uint32_t node = 0;                ///< its label
    std::uint32_t parent = none;           ///< the enclosing context; none for a root
    std::uint32_t depth = 0;
    std::uint64_t calls = 0;
    std::uint64_t cost = 0;                ///< its calls' inclusive values
    std::int64_t self = 0;                 ///< its calls' self values: what is spent in the label's own code here
    std::uint64_t parent_calls_with = 0;   ///< the parent context's calls that ran this one at least once
    std::uint64_t open_calls = 0;          ///< calls at the top whose enclosing scopes are not in the file
};

struct Step {
    std::uint32_t node = 0;
    std::uint32_t context = none;
};

struct Graph {
    std::vector<Node> nodes;
    std::vector<Edge> edges;
    std::uint64_t orphans = 0; ///< calls some of whose enclosing scopes are not in the file
    std::uint64_t overflows = 0; ///< self values that could not be summed (checked arithmetic; exit status 2)
    std::uint64_t calls = 0;
    cli::OpenScopes open; ///< what was open when the program stopped, as far as the file says
    std::vector<Context> contexts;
    std::vector<Step> path;
    std::int64_t bottleneck = 0; ///< the path's end: its last context's self value
};

class GraphBuilder {
public:
    explicit GraphBuilder(const pmc::Profile& p) : p_(p) {}

    /// One scope from the walker (pmc/profile_reader.hpp), which reports a scope after all its descendants.
    void add(const pmc::NestedInterval& s, std::size_t c) {
        const auto& path = s.path(); // label ids from the outermost scope found to this one
        const std::uint32_t n = node(s.label);
        ++g_.calls;
        if (!s.path_complete) ++g_.orphans;
        g_.open.note(s);
        {
            const std::uint32_t cx = context(s.thread, path);
            Context& x = g_.contexts[cx];
            ++x.calls;
            if (!cli::checked_add(x.cost, s.total(c))) ++g_.overflows;
            if (!cli::checked_add(x.self, s.self(c))) ++g_.overflows;
            if (s.parent == pmc::no_parent && s.depth > 0) ++x.open_calls;
            if (auto it = child_contexts_.find(key(s.thread, s.ordinal)); it != child_contexts_.end()) {
                for (auto k : it->second) ++g_.contexts[k].parent_calls_with;
                child_contexts_.erase(it);
            }
            if (s.parent != pmc::no_parent) {
                auto& kids = child_contexts_[key(s.thread, s.parent)];
                if (std::find(kids.begin(), kids.end(), cx) == kids.end()) kids.push_back(cx);
            }
        }
        Node& me = g_.nodes[n];
        ++me.calls;
        if (!cli::checked_add(me.self, s.self(c))) ++g_.overflows;
        // The distinct child labels of this call, gathered while its descendants were reported: one call of each
        // edge's parent that ran the child at least once.
        if (auto it = child_labels_.find(key(s.thread, s.ordinal)); it != child_labels_.end()) {
            for (auto child : it->second) ++g_.edges[edge(n, child)].parent_calls_with;
            child_labels_.erase(it);
        }
        if (path.size() < 2) { // at the top of its thread (or everything around it was lost)
            ++me.top_calls;
            if (!cli::checked_add(me.cost, s.total(c))) ++g_.overflows;
            return;
        }
        const std::uint32_t parent = node(path[path.size() - 2]);
        Edge& e = g_.edges[edge(parent, n)];
        std::size_t namesake = path.size() - 1;
        while (namesake-- > 0 && node(path[namesake]) != n) {}
        if (namesake != static_cast<std::size_t>(-1)) {
            // Recursion: this call's value is inside its outer namesake's already.
            if (e.recursive_count++ == 0)
                for (std::size_t i = namesake; i < path.size(); ++i)
                    e.recursion_chain += (i == namesake ? "" : " -> ") + g_.nodes[node(path[i])].name;
            return;
        }
        if (!cli::checked_add(e.cost, s.total(c))) ++g_.overflows;
        ++e.count;
        auto& kids = child_labels_[key(s.thread, s.parent)];
        if (std::find(kids.begin(), kids.end(), n) == kids.end()) kids.push_back(n);
    }

    Graph finish() {
        // Edges in a fixed order (by the labels' names) so that everything after is deterministic.
        std::vector<std::uint32_t> order(g_.edges.size());
        for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
            const Edge &x = g_.edges[a], &y = g_.edges[b];
            if (x.from != y.from) return g_.nodes[x.from].name < g_.nodes[y.from].name;
            return g_.nodes[x.to].name < g_.nodes[y.to].name;
        });
        std::vector<Edge> sorted;
        for (auto i : order) sorted.push_back(g_.edges[i]);
        g_.edges = std::move(sorted);
        for (auto& n : g_.nodes) n.first_out = none;
        for (std::size_t i = g_.edges.size(); i-- > 0;) {
            Edge& e = g_.edges[i];
            e.next_out = g_.nodes[e.from].first_out;
            g_.nodes[e.from].first_out = static_cast<std::uint32_t>(i);
            if (e.count) {
                ++g_.nodes[e.to].in_edges;
                g_.nodes[e.to].cost += e.cost; // costs propagate to nodes
            }
        }
        break_cycles();
        find_path();
        return std::move(g_);
    }

private:
    /// The node of a label id. Nodes are keyed by the label's text: two ids with the same text are one label, and
    /// ordering by name then orders nodes completely (the output cannot depend on ids).
    std::uint32_t node(std::uint32_t label) {
        if (auto it = node_of_.find(label); it != node_of_.end()) return it->second;
        std::string name = p_.string(label);
        auto [at, fresh] = node_named_.emplace(name, static_cast<std::uint32_t>(g_.nodes.size()));
        if (fresh) {
            Node n;
            n.label = label;
            n.name = std::move(name);
            g_.nodes.push_back(std::move(n));
        }
        node_of_.emplace(label, at->second);
        return at->second;
    }

    static std::uint64_t key(std::uint32_t thread, std::uint64_t ordinal) {
        return (std::uint64_t{thread} << 44) ^ ordinal; // ordinals stay far below 2^44 (16 TiB of records)
    }

    std::uint32_t edge(std::uint32_t from, std::uint32_t to) {
        const std::uint64_t key = (std::uint64_t{from} << 32) | to;
        auto [it, fresh] = edge_of_.emplace(key, static_cast<std::uint32_t>(g_.edges.size()));
        if (fresh) {
            Edge e;
            e.from = from;
            e.to = to;
            g_.edges.push_back(e);
        }
        return it->second;
    }

    /// The context of a scope whose label path (ids, outermost first) is `path`: found from the last one's, which
    /// shares most of its prefix (the walk goes down and up one chain), so a scope costs a few lookups.
    std::uint32_t context(std::uint32_t thread, const std::vector<std::uint32_t>& path) {
        if (thread != cache_thread_) {
            cache_thread_ = thread;
            cache_nodes_.clear();
            cache_contexts_.clear();
        }
        std::size_t same = 0;
        while (same < path.size() && same < cache_nodes_.size() && cache_nodes_[same] == node(path[same])) ++same;
        cache_nodes_.resize(same);
        cache_contexts_.resize(same);
        for (std::size_t i = same; i < path.size(); ++i) {
            const std::uint32_t n = node(path[i]);
            const std::uint32_t parent = i ? cache_contexts_[i - 1] : none;
            const std::uint64_t k = (std::uint64_t{parent} << 32) | n;
            auto [it, fresh] = context_of_.emplace(k, static_cast<std::uint32_t>(g_.contexts.size()));
            if (fresh) {
                Context x;
                x.node = n;
                x.parent = parent;
                x.depth = static_cast<std::uint32_t>(i);
                g_.contexts.push_back(x);
            }
            cache_nodes_.push_back(n);
            cache_contexts_.push_back(it->second);
        }
        return cache_contexts_.back();
    }

    /// Follows edges in name order from the roots (then from any label not reached, in name order) and marks each
    /// edge back into the search's current chain: a cycle without recursion. What remains is acyclic.
    void break_cycles() {
        const std::size_t n = g_.nodes.size();
        std::vector<std::uint32_t> by_name(n);
        for (std::uint32_t i = 0; i < n; ++i) by_name[i] = i;
        std::sort(by_name.begin(), by_name.end(),
                  [&](std::uint32_t a, std::uint32_t b) { return g_.nodes[a].name < g_.nodes[b].name; });
        std::vector<std::uint32_t> starts;
        for (auto i : by_name)
            if (g_.nodes[i].in_edges == 0) starts.push_back(i);
        for (auto i : by_name)
            if (g_.nodes[i].in_edges != 0) starts.push_back(i);
        enum : std::uint8_t { white, grey, black };
        std::vector<std::uint8_t> colour(n, white);
        struct Frame {
            std::uint32_t node, next_edge;
        };
        std::vector<Frame> frames;
        postorder_.clear();
        for (auto s : starts) {
            if (colour[s] != white) continue;
            colour[s] = grey;
            frames.push_back({s, g_.nodes[s].first_out});
            while (!frames.empty()) {
                Frame& f = frames.back();
                if (f.next_edge == none) {
                    colour[f.node] = black;
                    postorder_.push_back(f.node);
                    frames.pop_back();
                    continue;
                }
                Edge& e = g_.edges[f.next_edge];
                f.next_edge = e.next_out;
                if (!e.count) continue; // recursion only
                if (colour[e.to] == grey) {
                    e.closes_cycle = true;
                    --g_.nodes[e.to].in_edges;
                } else if (colour[e.to] == white) {
                    colour[e.to] = grey;
                    frames.push_back({e.to, g_.nodes[e.to].first_out});
                }
            }
        }
    }

    bool followed(const Edge& e) const { return e.count > 0 && !e.closes_cycle; }

    /// The labels of context x, outermost first, joined by " > ".
    std::string context_text(std::uint32_t x) const {
        std::string t;
        for (; x != none; x = g_.contexts[x].parent) t = g_.nodes[g_.contexts[x].node].name + (t.empty() ? "" : " > ") + t;
        return t;
    }

    /// The path ends where the cost is: the calling context whose own self value is largest. Seen as llvm-mca's
    /// bottleneck over the tree of contexts, each with its self value as a sink: a context's cost is never more than
    /// its parent's, so the smallest step of a chain ending in a self value is that self value. Ties: the deeper
    /// context, then the path's text (so that an exact counter gives the same path on every run).
    void find_path() {
        std::uint32_t best = none;
        std::string best_text; // built only when a tie needs it
        for (std::uint32_t x = 0; x < g_.contexts.size(); ++x) {
            if (best == none) {
                best = x;
                continue;
            }
            const Context &a = g_.contexts[x], &b = g_.contexts[best];
            if (a.self != b.self) {
                if (a.self > b.self) best = x, best_text.clear();
            } else if (a.depth != b.depth) {
                if (a.depth > b.depth) best = x, best_text.clear();
            } else {
                if (best_text.empty()) best_text = context_text(best);
                std::string text = context_text(x);
                if (text < best_text) best = x, best_text = std::move(text);
            }
        }
        if (best == none) return;
        g_.bottleneck = g_.contexts[best].self;
        for (std::uint32_t x = best; x != none; x = g_.contexts[x].parent)
            g_.path.insert(g_.path.begin(), Step{g_.contexts[x].node, x});
    }

    const pmc::Profile& p_;
    Graph g_;
    std::unordered_map<std::uint32_t, std::uint32_t> node_of_;    // label id -> node
    std::unordered_map<std::string, std::uint32_t> node_named_;  // label text -> node
    std::unordered_map<std::uint64_t, std::uint32_t> edge_of_;
    // Per open parent call (thread, ordinal): the child labels seen under it so far. Only scopes still open in the
    // walk have an entry, so this holds at most the nesting's depth of them.
    std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> child_labels_;
    std::vector<std::uint32_t> postorder_; // nodes, children before parents
    std::unordered_map<std::uint64_t, std::uint32_t> context_of_; // (parent context, node) -> context
    std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> child_contexts_; // as child_labels_, for contexts
    std::uint32_t cache_thread_ = none;
    std::vector<std::uint32_t> cache_nodes_, cache_contexts_; // the last scope's path and its contexts
};

/// The graph of counter `c` over every thread, or only thread `only`; a failure if the file could not be read again.
pmc::Result<Graph> build_graph(pmc::ProfileReader& reader, std::size_t c, std::optional<std::uint32_t> only) {
    GraphBuilder b(reader.profile());
    auto failure = reader.walk([&](const pmc::NestedInterval& s) { b.add(s, c); }, [](const pmc::NestedMark&) {}, only);
    if (failure) return std::move(*failure);
    return b.finish();
}

// ---- output ------------------------------------------------------------------------------------------------------

struct Style {
    bool on = false;
    std::string operator()(const char* code, const std::string& s) const {
        return on ? fmt::format("\x1b[{}m{}\x1b[0m", code, s) : s;
    }
};

using cli::show;

template <class A, class B>
double ratio(A a, B b) { return b ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }

std::string path_line(const Graph& g) {
    std::string s;
    for (const auto& step : g.path) s += (s.empty() ? "" : " > ") + g.nodes[step.node].name;
    return s;
}

void print_graph(const Graph& g, const pmc::ProfileCounter& counter, bool list_all, const Style& style) {
    const std::string& unit = counter.unit;
    const std::string unit_name = unit == "events" ? counter.name : unit;
    fmt::print("graph: {} labels, {} edges ({} calls)", g.nodes.size(), g.edges.size(), g.calls);
    if (g.orphans)
        fmt::print("; {} calls whose enclosing scopes are not all in the file (lost, or still open when it ended) "
                   "are placed under the nearest enclosing scope found, or at the top",
                   g.orphans);
    fmt::print("\n");
    if (g.path.empty()) {
        fmt::print("no scopes: no path\n");
        return;
    }
    const Context& root = g.contexts[g.path.front().context];
    const Node& end = g.nodes[g.path.back().node];
    fmt::print("{} {} spent in {}'s own code at the end of this chain ({:.2f}% of its root's {}):\n",
               style("1", "costliest path:"),
               show(static_cast<double>(g.bottleneck), unit) + (unit == "ns" ? "" : " " + unit_name), end.name,
               100 * ratio(g.bottleneck, root.cost), show(static_cast<double>(root.cost), unit));
    std::size_t width = 5;
    for (std::size_t i = 0; i < g.path.size(); ++i) width = std::max(width, g.nodes[g.path[i].node].name.size() + 2 * i);
    width = std::min<std::size_t>(width, 60);
    std::vector<std::string> names; // the path's labels, indented by depth: none cut into another's text
    for (std::size_t i = 0; i < g.path.size(); ++i)
        names.push_back(std::string(2 * i, ' ') + g.nodes[g.contexts[g.path[i].context].node].name);
    const cli::LabelColumn column(names, width);
    fmt::print("  {:<{}}  {:>12}  {:>7}  {:>8}  {:>10}  {:>9}  {:>11}\n", "label", width, "cost", "of root",
               "of label", "frequency", "per call", "probability");
    for (std::size_t i = 0; i < g.path.size(); ++i) {
        const Context& x = g.contexts[g.path[i].context];
        const Node& n = g.nodes[x.node];
        const std::string name = column(names[i]);
        const bool last = i + 1 == g.path.size();
        const std::string shown = fmt::format("{:<{}}", name, width);
        const std::string sink =
            last ? fmt::format("  (sink: its own self value {})", show(static_cast<double>(x.self), unit)) : "";
        if (x.parent == none) {
            fmt::print("  {}  {:>12}  {:>6.2f}%  {:>7.2f}%  {:>10}  {:>9}  {:>11}{}{}\n",
                       last ? style("1;31", shown) : style("1", shown), show(static_cast<double>(x.cost), unit),
                       100.0, 100 * ratio(x.cost, n.cost), x.calls, "", "(root)", sink,
                       x.open_calls ? fmt::format("  ({} call{} whose enclosing scopes are not in the file)",
                                                  x.open_calls, x.open_calls == 1 ? "" : "s")
                                    : "");
            continue;
        }
        const Context& parent = g.contexts[x.parent];
        const double share = ratio(x.cost, root.cost);
        fmt::print("  {}  {:>12}  {}  {:>7.2f}%  {:>10}  {:>9.2f}  {:>10.2f}%{}\n",
                   last ? style("1;31", shown) : shown, show(static_cast<double>(x.cost), unit),
                   style(share >= 0.5 ? "31" : share >= 0.1 ? "33" : "0", fmt::format("{:>6.2f}%", 100 * share)),
                   100 * ratio(x.cost, n.cost), x.calls, ratio(x.calls, parent.calls),
                   100 * ratio(x.parent_calls_with, parent.calls), sink);
    }
    fmt::print("path: {}\n", path_line(g));
    for (const auto& e : g.edges) {
        if (e.recursive_count)
            fmt::print("{} {} ({} nested call{}; its value counted once, in the outermost call)\n",
                       style("33", "recursion:"), e.recursion_chain, e.recursive_count,
                       e.recursive_count == 1 ? "" : "s");
        if (e.closes_cycle)
            fmt::print("{} {} -> {} closes a cycle without recursion (each runs inside the other in different calls); "
                       "the path does not follow it\n",
                       style("33", "cycle:"), g.nodes[e.from].name, g.nodes[e.to].name);
    }
    if (!list_all) return;
    std::vector<std::uint32_t> order(g.nodes.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return g.nodes[a].cost != g.nodes[b].cost ? g.nodes[a].cost > g.nodes[b].cost : g.nodes[a].name < g.nodes[b].name;
    });
    std::size_t w = 5;
    for (const auto& n : g.nodes) w = std::max(w, n.name.size());
    w = std::min<std::size_t>(w, 48);
    fmt::print("\nevery label, costliest first (-> a child: cost, frequency, probability):\n");
    fmt::print("{:<{}}  {:>9}  {:>12}  {:>12}\n", "label", w, "calls", "cost", "self");
    for (auto i : order) {
        const Node& n = g.nodes[i];
        fmt::print("{:<{}}  {:>9}  {:>12}  {:>12}{}\n", n.name, w, n.calls, show(static_cast<double>(n.cost), unit),
                   show(static_cast<double>(n.self), unit), n.top_calls ? "  (root)" : "");
        for (auto k = n.first_out; k != none; k = g.edges[k].next_out) {
            const Edge& e = g.edges[k];
            fmt::print("  -> {}: {}, {} time{}, in {:.2f}% of its calls{}{}\n", g.nodes[e.to].name,
                       show(static_cast<double>(e.cost), unit), e.count, e.count == 1 ? "" : "s",
                       100 * ratio(e.parent_calls_with, n.calls),
                       e.recursive_count ? fmt::format("; {} recursive", e.recursive_count) : "",
                       e.closes_cycle ? "; closes a cycle" : "");
        }
    }
}

void json_graph(pmc::JsonWriter& j, const Graph& g, const pmc::Profile& p) {
    j.field("calls", g.calls).field("orphans", g.orphans).key("open_scopes");
    g.open.json(j, p);
    j.key("labels").begin_array();
    for (const auto& n : g.nodes)
        j.begin_object().field("label", n.name).field("calls", n.calls).field("top_level_calls", n.top_calls)
            .field("cost", n.cost).field("self", n.self).field("root", n.top_calls > 0)
            .field("sink", n.first_out == none).end_object();
    j.end_array().key("edges").begin_array();
    for (const auto& e : g.edges) {
        const Node& parent = g.nodes[e.from];
        j.begin_object().field("parent", parent.name).field("child", g.nodes[e.to].name).field("cost", e.cost)
            .field("frequency", e.count).field("per_parent_call", ratio(e.count, parent.calls))
            .field("parent_calls_with", e.parent_calls_with).field("parent_calls", parent.calls)
            .field("probability", ratio(e.parent_calls_with, parent.calls))
            .field("recursive", e.recursive_count).field("closes_cycle", e.closes_cycle);
        if (e.recursive_count) j.field("recursion", e.recursion_chain);
        j.end_object();
    }
    j.end_array().key("path").begin_object();
    j.field("definition", "the calling context (labels as they ran, from an outermost scope) whose own self value is "
                          "largest: the path ends where the cost is");
    j.field("bottleneck", g.bottleneck).field("text", path_line(g)).key("steps").begin_array();
    const std::uint64_t root_cost = g.path.empty() ? 0 : g.contexts[g.path.front().context].cost;
    for (const auto& s : g.path) {
        const Context& x = g.contexts[s.context];
        const Node& n = g.nodes[x.node];
        j.begin_object().field("label", n.name).field("cost", x.cost).field("self", x.self);
        j.field("share_of_root", ratio(x.cost, root_cost)).field("share_of_label", ratio(x.cost, n.cost));
        j.field("calls", x.calls);
        if (x.parent == none) {
            j.field("open_calls", x.open_calls);
        } else {
            const Context& parent = g.contexts[x.parent];
            j.field("frequency", x.calls).field("per_parent_call", ratio(x.calls, parent.calls))
                .field("probability", ratio(x.parent_calls_with, parent.calls));
        }
        j.end_object();
    }
    j.end_array().end_object();
}

/// --expect-path's argument as path_line writes it: labels joined by " > " (given so, or joined by ';').
std::string expected_path(const std::string& given) {
    if (given.find(" > ") != std::string::npos || given.find(';') == std::string::npos) return given;
    std::string s = given;
    for (std::size_t at = s.find(';'); at != std::string::npos; at = s.find(';', at + 3)) s.replace(at, 1, " > ");
    return s;
}

/// For an expected path written with '/' between its labels ("join/probe"), which names one label "join/probe":
/// the forms accepted, and the found path in them where it is the same labels. A '/' cannot separate labels, since
/// a label may contain it (a file's path, "sqlite/select").
std::string slash_hint(const std::string& expected, const std::string& found) {
    if (expected.find('/') == std::string::npos || expected.find(" > ") != std::string::npos) return "";
    std::string slashed = found;
    for (std::size_t at = slashed.find(" > "); at != std::string::npos; at = slashed.find(" > ", at + 1))
        slashed.replace(at, 3, "/");
    return fmt::format("; a '/' does not separate labels (a label may contain it): join them by \" > \" as printed, "
                       "or by ';'{}",
                       slashed == expected && !found.empty() ? ", e.g. --expect-path '" + found + "'" : "");
}

} // namespace

int cmd_critical(const std::vector<std::string>& arguments) {
    pmc_cli::CommandLine cl("pmc critical", critical_help);
    cli::ProfileArgs args;
    std::string color = "auto", expect_text;
    bool list_all = false;
    args.add_to(cl);
    cl.flag("--graph", list_all);
    pmc_cli::Option expect_option =
        cl.option("--expect-path", expect_text, "the path's labels, e.g. \"compile > typeck\"");
    cl.option("--color", color, "auto, always or never");
    if (auto status = cl.parse(arguments)) return *status;
    if (expect_option.given() && expect_text.empty())
        return cl.usage_error("--expect-path needs the path's labels, e.g. \"compile > typeck\"");
    const std::optional<std::string> expect_path =
        expect_option.given() ? std::optional<std::string>(expected_path(expect_text)) : std::nullopt;
    if (color != "auto" && color != "always" && color != "never")
        return cl.usage_error(fmt::format("--color {}: auto, always or never", color));
    if (auto why = args.check("critical")) return cl.usage_error(*why);
    if (args.per_thread && expect_path)
        return cl.usage_error("--expect-path checks one path: all threads together, or --thread N; not "
                              "--per-thread");
    const std::string& file = args.file;
    const bool json = args.json, per_thread = args.per_thread;

    // The streaming reader: a profile larger than memory is walked page by page.
    std::size_t c = 0;
    auto reader = cli::open_profile("critical", file, args.counter, c);
    if (!reader) return 1;
    const pmc::Profile& p = reader->profile();
    const pmc::ProfileCounter& counter = p.counters[c];
    std::vector<const pmc::ProfileThread*> threads;
    if (!cli::select_threads("critical", p, args, threads)) return 1; // --thread NAME: its number
    const std::optional<std::uint32_t> only_thread = args.only_thread;
    // One graph for all threads (or the one asked for), or one per thread.
    std::vector<std::pair<std::optional<std::uint32_t>, Graph>> graphs;
    auto add_graph = [&](std::optional<std::uint32_t> index) {
        auto g = build_graph(*reader, c, index);
        if (!g) {
            fmt::print(stderr, "pmc critical: {}\n", g.failure().message);
            return false;
        }
        graphs.emplace_back(index, std::move(*g));
        return true;
    };
    if (per_thread) {
        for (const auto* t : threads)
            if (!add_graph(t->index)) return 1;
    } else if (!add_graph(only_thread)) {
        return 1;
    }
    // Not whole: part of the file lost, a sum that could not be made, or scopes still open when the program
    // stopped (killed). The path is then shown but not judged: --expect-path gives 2, never 0.
    std::uint64_t orphans = 0;
    bool overflowed = false;
    for (const auto& [index, g] : graphs) {
        orphans += g.orphans;
        overflowed = overflowed || g.overflows > 0;
    }
    if (overflowed) fmt::print(stderr, "pmc critical: {}\n", cli::overflow_text("some self values were"));
    const bool open_at_end = orphans != 0 || cli::ended_inside_scopes(p);
    const int read_status = p.problems.empty() && !open_at_end && !overflowed ? 0 : 2;
    auto say_open = [&] {
        if (open_at_end && p.problems.empty())
            fmt::print(stderr, "pmc critical: {}; its path is not judged\n{}", cli::not_whole_text(file, p),
                       cli::open_at_end_text(p));
    };
    // --expect-path's judgement, also put in the JSON (so a CI reading it sees the verdict).
    const bool one_path = !per_thread && !graphs.empty(); // --expect-path excludes --per-thread
    const std::string found = one_path ? path_line(graphs.front().second) : std::string();
    const char* const gate_verdict = !expect_path             ? "no path expected"
                                     : read_status != 0       ? "not judged"
                                     : found == *expect_path ? "same"
                                                              : "differs";
    const int exit_status = !expect_path || read_status != 0 ? read_status : found == *expect_path ? 0 : 3;
    // --expect-path, said after the report (a CI log then shows the graph that failed it).
    auto status_after = [&]() -> int {
        if (exit_status == 3)
            fmt::print(stderr, "pmc critical: the costliest path is \"{}\", not the expected \"{}\" (exit status 3){}\n",
                       found.empty() ? "(none: no scopes)" : found, *expect_path, slash_hint(*expect_path, found));
        return exit_status;
    };
    const int status = read_status;
    // The rule every profile tool shares (header flag, no fallback, no failed thread, not multiplexed).
    const pmc::CounterExactness counted = reader->exactness(c);
    const bool exact = counted.exact && status == 0;
    const std::string exactness =
        counted.exact ? (status == 0 ? "exact: the same program and input give this path on every run"
                                     : "exact, but part of the file is lost: the path may differ from a whole file's")
                      : "not exact (" + counted.why + "): the path may differ run to run when costs are close";
    const std::string origin = counter.read_path == "emulator" ? "; " + counted.why : ""; // pmc emulate's counts

    if (json) {
        pmc::JsonWriter j;
        j.begin_object().field("file", file).field("counter", counter.name).field("unit", counter.unit);
        j.field("exact", counted.exact).field("exact_why", counted.why).field("deterministic", exact);
        j.field("cost_rule", "a label's cost is the inclusive value of its outermost calls: a call inside a call of "
                             "the same label on its thread is counted once, in the outermost");
        j.key("problems").begin_array();
        for (const auto& w : p.problems) j.value(w);
        j.end_array().key("graphs").begin_array();
        for (const auto& [index, g] : graphs) {
            j.begin_object();
            if (index) j.field("thread", *index);
            else j.field("thread", "all");
            json_graph(j, g, p);
            j.end_object();
        }
        j.end_array().key("gate").begin_object().key("expect_path");
        if (expect_path) j.value(*expect_path);
        else j.null();
        if (one_path) j.field("path", found);
        else j.key("path").null();
        j.field("verdict", gate_verdict).field("exit_status", exit_status).end_object();
        j.end_object();
        fmt::print("{}\n", j.str());
        if (!p.problems.empty())
            fmt::print(stderr, "pmc critical: {} (see \"problems\")\n", cli::incomplete_text(file, p));
        say_open();
        return status_after();
    }

    const char* no_color = std::getenv("NO_COLOR");
    Style style;
    style.on = color == "always" || (color == "auto" && ::isatty(1) && !(no_color && *no_color));
    fmt::print("profile {}: counter {} ({}), {}{}\n", file, counter.name,
               counter.unit == "events" ? "a count" : counter.unit, exactness, origin);
    if (per_thread) {
        for (std::size_t i = 0; i < threads.size(); ++i) {
            const auto* t = threads[i];
            fmt::print("\n== thread {}{}\n", t->index, t->name.empty() ? "" : " \"" + t->name + "\"");
            print_graph(graphs[i].second, counter, list_all, style);
        }
    } else {
        fmt::print("{}\n", only_thread ? fmt::format("thread {} only", *only_thread)
                       : threads.empty()     ? std::string("no threads recorded events")
                       : threads.size() == 1 ? std::string("its one thread")
                                             : fmt::format("all {} threads together", threads.size()));
        print_graph(graphs.front().second, counter, list_all, style);
    }
    for (const auto& [index, g] : graphs) // each graph's threads (all, one, or one per graph)
        if (g.open.any())
            fmt::print("open when the program stopped (their enclosing scopes are not in the file: the scopes recorded "
                       "inside them count as outermost):\n{}",
                       g.open.text(p));
    say_open();
    if (!p.problems.empty()) {
        fmt::print(stderr, "pmc critical: {}; what was lost:\n", cli::incomplete_text(file, p));
        for (std::size_t i = 0; i < p.problems.size() && i < 20; ++i) fmt::print(stderr, "  {}\n", p.problems[i]);
        if (p.problems.size() > 20)
            fmt::print(stderr, "  ... and {} more (--json lists them all)\n", p.problems.size() - 20);
    }
    return status_after();
}

} // namespace pmc_tool
