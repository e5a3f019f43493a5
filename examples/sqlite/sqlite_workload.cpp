// SPDX-License-Identifier: MIT
// pmc-example-sqlite: per-statement profiles of a SQLite workload, through SQLite's own trace callbacks.
//
//     PMC_PROFILE=base.pmcprof ./pmc-example-sqlite                 # wall-time
//     PMC_PROFILE=new.pmcprof ./pmc-example-sqlite --drop-index     # the planted change
//     pmc summarize base.pmcprof; pmc diff base.pmcprof -- new.pmcprof; pmc critical base.pmcprof
//
// An order-processing workload on an in-memory database: tens of thousands of statements of a few kinds (prepared
// once, run with bound values), with triggers that nest (an order's insert fires order_placed, whose balance update
// fires overdrawn). SQLite calls back where a statement begins (SQLITE_TRACE_STMT) and where it ends
// (SQLITE_TRACE_PROFILE), in two calls: no scope can span that, so each statement is a Profiler::begin ... end
// interval, labelled by its SQL text normalized (literals as ?), interned once through a cache of this program's.
//
// Triggers: SQLite reports where a trigger begins ("-- TRIGGER name") and where each of its steps begins
// ("-- step text"), but not where either ends. A step ends where the next step of its trigger begins, a trigger
// where its next invocation begins (without recursive_triggers a trigger never runs inside itself), and both at
// the latest when their statement ends. So a trigger's last step also carries what its statement does after the
// trigger returns (for these one-row statements, little). Which trigger a step belongs to comes from the schema.
#include <pmc/profiler.hpp>

#include <command_line.hpp>

#include <sqlite3.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

constexpr const char* help = R"(usage: pmc-example-sqlite [--statements N] [--accounts N] [--drop-index] [--plant N] [--seed N]

An order-processing workload on an in-memory SQLite database, profiled per statement by
pmc::Profiler when PMC_PROFILE names a file (PMC_PROFILE_COUNTERS chooses the counters; default
wall-time). SQLite's trace callbacks begin and end each statement (labelled by its SQL text,
literals as ?), each trigger and each trigger step; triggers nest. Then: pmc summarize FILE.

Options:
  --statements N  Statements of the workload (default 30000; from 100 to 10000000): 50 % place
                  an order (its trigger updates the account, whose trigger may raise an alert),
                  25 % sum an account's orders, 15 % ship an order, 10 % deposit.
  --accounts N    Accounts (default 1000; from 1 to 1000000).
  --drop-index    The planted change: no index orders_by_account, so summing an account's
                  orders scans the whole table (and placing an order maintains no index).
  --plant N       A change of known size in this program's own code: after each deposit, a loop
                  of exactly 2 x N more instructions (x86-64, AArch64) in the workload scope's
                  self value, and nothing else; under an exact counter (pmc emulate) pmc diff
                  reports exactly 2 x N x deposits there.
  --seed N        The workload's random choices (default 1): the same seed, the same statements.
  -h, --help      Show this help.
)";

const char* const schema = R"(
CREATE TABLE accounts(id INTEGER PRIMARY KEY, owner TEXT NOT NULL, balance INTEGER NOT NULL);
CREATE TABLE orders(id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, amount INTEGER NOT NULL, status TEXT NOT NULL);
CREATE TABLE audit(order_id INTEGER NOT NULL, account_id INTEGER NOT NULL, amount INTEGER NOT NULL);
CREATE TABLE alerts(account_id INTEGER NOT NULL, balance INTEGER NOT NULL);
CREATE TRIGGER order_placed AFTER INSERT ON orders BEGIN
  UPDATE accounts SET balance = balance - new.amount WHERE id = new.account_id;
  INSERT INTO audit VALUES (new.id, new.account_id, new.amount);
END;
CREATE TRIGGER overdrawn AFTER UPDATE OF balance ON accounts WHEN new.balance < 0 BEGIN
  INSERT INTO alerts VALUES (new.id, new.balance);
END;
)";
const char* const index_sql = "CREATE INDEX orders_by_account ON orders(account_id)";

/// SQL text as a label: whitespace runs as one space, string and number literals as ?, no trailing ';'.
std::string normalize_sql(std::string_view sql) {
    std::string out;
    for (std::size_t i = 0; i < sql.size();) {
        const char c = sql[i];
        if (std::isspace(static_cast<unsigned char>(c))) {
            while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i]))) ++i;
            if (!out.empty()) out += ' ';
        } else if (c == '\'') { // a string literal ('' inside is a quote)
            for (++i; i < sql.size(); ++i)
                if (sql[i] == '\'' && !(i + 1 < sql.size() && sql[i + 1] == '\'')) break;
                else if (sql[i] == '\'') ++i;
            ++i;
            out += '?';
        } else if (std::isdigit(static_cast<unsigned char>(c)) &&
                   (out.empty() || !(std::isalnum(static_cast<unsigned char>(out.back())) || out.back() == '_'))) {
            while (i < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[i])) || sql[i] == '.')) ++i;
            out += '?';
        } else {
            out += c;
            ++i;
        }
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
    return out;
}

/// What a traced SQL text is, worked out once per distinct text.
struct TextInfo {
    enum Kind { statement, trigger_begin, step } kind = statement;
    pmc::Label label;
    int trigger = -1;                ///< trigger: its index
    std::vector<int> step_of;        ///< step: the triggers that have this step
};

/// Per statement and trigger, begins and ends the profiler's intervals from SQLite's trace callbacks.
class Tracer {
public:
    Tracer(pmc::Profiler& prof, sqlite3* db) : prof_(prof) {
        // The triggers' steps, from the schema: the text between BEGIN and END, split at ';' (the example's
        // triggers have no ';' inside a literal), normalized as SQLite's trace text will be.
        sqlite3_stmt* s = nullptr;
        sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name", -1, &s,
                           nullptr);
        while (sqlite3_step(s) == SQLITE_ROW) {
            std::string name = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
            std::string sql = reinterpret_cast<const char*>(sqlite3_column_text(s, 1));
            std::string upper = sql;
            for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            const std::size_t begin = upper.find("BEGIN"), end = upper.rfind("END");
            std::vector<std::string> steps;
            if (begin != std::string::npos && end != std::string::npos && end > begin)
                for (std::size_t at = begin + 5; at < end;) {
                    std::size_t semi = sql.find(';', at);
                    if (semi == std::string::npos || semi > end) semi = end;
                    std::string step = normalize_sql(std::string_view(sql).substr(at, semi - at));
                    if (!step.empty()) steps.push_back(step);
                    at = semi + 1;
                }
            triggers_.push_back({name, std::move(steps)});
        }
        sqlite3_finalize(s);
        // Profiling off: no callbacks at all, so the workload runs as it would without the profiler.
        if (prof_.enabled()) sqlite3_trace_v2(db, SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE, &Tracer::callback, this);
    }

    /// Ends what is still open (a statement never stepped to its end).
    void finish() {
        while (!open_.empty()) pop();
    }

private:
    struct Open {
        const TextInfo* info;
        const void* stmt; ///< the statement the interval belongs to (its top-level statement's for triggers)
    };
    struct Trigger {
        std::string name;
        std::vector<std::string> steps;
    };

    static int callback(unsigned type, void* self, void* p, void* x) {
        auto& t = *static_cast<Tracer*>(self);
        if (type == SQLITE_TRACE_STMT) t.on_begin(p, static_cast<const char*>(x));
        else if (type == SQLITE_TRACE_PROFILE) t.on_end(p);
        return 0;
    }

    /// The cache: SQL text (as SQLite passes it) to what it is and its label. A prepared statement passes the same
    /// text every run, so after the first run of each it is one hash lookup, no lock and no allocation.
    const TextInfo& info(const char* text) {
        const std::string_view key(text);
        if (auto it = cache_.find(key); it != cache_.end()) return it->second;
        TextInfo i;
        std::string name;
        if (key.substr(0, 11) == "-- TRIGGER ") {
            i.kind = TextInfo::trigger_begin;
            name = "TRIGGER " + std::string(key.substr(11));
            for (std::size_t k = 0; k < triggers_.size(); ++k)
                if (triggers_[k].name == key.substr(11)) i.trigger = static_cast<int>(k);
        } else if (key.substr(0, 3) == "-- ") {
            i.kind = TextInfo::step;
            name = normalize_sql(key.substr(3));
            for (std::size_t k = 0; k < triggers_.size(); ++k)
                for (const auto& s : triggers_[k].steps)
                    if (s == name) i.step_of.push_back(static_cast<int>(k));
        } else {
            name = normalize_sql(key);
        }
        i.label = prof_.label(name);
        keys_.emplace_back(key); // the map's key must outlive SQLite's text
        return cache_.emplace(keys_.back(), std::move(i)).first->second;
    }

    void push(const TextInfo& i, const void* stmt) {
        open_.push_back({&i, stmt});
        prof_.begin(i.label);
    }
    void pop() {
        prof_.end(open_.back().info->label);
        open_.pop_back();
    }
    /// Ends every interval above position `keep` (open_[keep] stays open).
    void end_above(std::size_t keep) {
        while (open_.size() > keep + 1) pop();
    }

    void on_begin(void* stmt, const char* text) {
        const TextInfo& i = info(text);
        switch (i.kind) {
        case TextInfo::statement:
            push(i, stmt);
            return;
        case TextInfo::trigger_begin:
            // Its previous invocation (the statement's previous row) has ended, with everything it ran.
            for (std::size_t k = open_.size(); k-- > 0;)
                if (open_[k].info->kind == TextInfo::trigger_begin && open_[k].info->trigger == i.trigger) {
                    while (open_.size() > k) pop();
                    break;
                }
            push(i, stmt);
            return;
        case TextInfo::step:
            // A step of the innermost open trigger that has it: whatever ran inside that trigger since has ended.
            for (std::size_t k = open_.size(); k-- > 0;) {
                const TextInfo& o = *open_[k].info;
                if (o.kind != TextInfo::trigger_begin) continue;
                bool mine = i.step_of.empty(); // unknown step: the innermost trigger's
                for (int t : i.step_of) mine = mine || t == o.trigger;
                if (mine) {
                    end_above(k);
                    break;
                }
            }
            push(i, stmt);
            return;
        }
    }

    void on_end(void* stmt) {
        // The statement's interval and everything its triggers left open (a statement begun before tracing
        // started has none: ignored).
        for (std::size_t k = open_.size(); k-- > 0;)
            if (open_[k].info->kind == TextInfo::statement && open_[k].stmt == stmt) {
                while (open_.size() > k) pop();
                return;
            }
    }

    pmc::Profiler& prof_;
    std::vector<Trigger> triggers_;
    std::deque<std::string> keys_;
    std::unordered_map<std::string_view, TextInfo> cache_;
    std::vector<Open> open_;
};

/// A deterministic generator (splitmix64): the same seed, the same workload.
struct Random {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::int64_t below(std::uint64_t n) { return static_cast<std::int64_t>(next() % n); }
};

bool check(sqlite3* db, int rc, const char* what) {
    if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return true;
    std::fprintf(stderr, "pmc-example-sqlite: %s: %s\n", what, sqlite3_errmsg(db));
    return false;
}

/// A statement prepared once and run many times.
struct Statement {
    sqlite3* db;
    sqlite3_stmt* stmt = nullptr;
    Statement(sqlite3* d, const char* sql) : db(d) {
        if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) {
            std::fprintf(stderr, "pmc-example-sqlite: cannot prepare '%s': %s\n", sql, sqlite3_errmsg(db));
            std::exit(1);
        }
    }
    ~Statement() { sqlite3_finalize(stmt); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    /// Binds the values, steps to the end, resets; the sum of column 0 over the rows (a checksum).
    std::int64_t run(std::initializer_list<std::int64_t> values) {
        int n = 0;
        for (std::int64_t v : values) sqlite3_bind_int64(stmt, ++n, v);
        std::int64_t sum = 0;
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) sum += sqlite3_column_int64(stmt, 0);
        if (!check(db, rc, sqlite3_sql(stmt))) std::exit(1);
        sqlite3_reset(stmt);
        return sum;
    }
};

bool parse_number(const char* text, unsigned long long low, unsigned long long high, unsigned long long& out) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (!*text || *end || errno || v < low || v > high || text[0] == '-') return false;
    out = v;
    return true;
}

/// --plant's work: a loop of exactly 2 * n instructions (dec + jnz, or subs + b.ne), n >= 1, plus a call's constant.
/// Always called (with 1 + N), so that a planted N changes the count by exactly 2 * N.
__attribute__((noinline)) void known_work(std::uint64_t n) {
#if defined(__x86_64__)
    asm volatile("1:\n\tdec %0\n\tjnz 1b" : "+r"(n) : : "cc");
#elif defined(__aarch64__)
    asm volatile("1:\n\tsubs %0, %0, #1\n\tb.ne 1b" : "+r"(n) : : "cc");
#else
    for (volatile std::uint64_t i = 0; i < n; i = i + 1) {
    }
#endif
}

} // namespace

int main(int argc, char** argv) {
    unsigned long long statements = 30000, accounts = 1000, seed = 1, plant = 0;
    bool drop_index = false;
    pmc_cli::CommandLine command_line("pmc-example-sqlite", help);
    struct Number {
        const char* name;
        unsigned long long* out;
        unsigned long long low, high;
        std::string text;
    } numbers[] = {{"--statements", &statements, 100, 10000000, {}},
                   {"--accounts", &accounts, 1, 1000000, {}},
                   {"--seed", &seed, 0, UINT64_MAX, {}},
                   {"--plant", &plant, 0, 1000000000, {}}};
    for (Number& n : numbers)
        command_line.option(n.name, n.text, "a number from " + std::to_string(n.low) + " to " + std::to_string(n.high));
    command_line.flag("--drop-index", drop_index);
    if (auto status = command_line.parse(argc, argv)) return *status;
    for (const Number& n : numbers)
        if (command_line.count(n.name) > 0 && !parse_number(n.text.c_str(), n.low, n.high, *n.out))
            return command_line.usage_error(std::string(n.name) + " needs a number from " + std::to_string(n.low) +
                                            " to " + std::to_string(n.high) + ", not '" + n.text + "'");

    sqlite3* db = nullptr;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
        std::fprintf(stderr, "pmc-example-sqlite: cannot open an in-memory database: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    if (!check(db, sqlite3_exec(db, schema, nullptr, nullptr, nullptr), "creating the schema") ||
        (!drop_index && !check(db, sqlite3_exec(db, index_sql, nullptr, nullptr, nullptr), index_sql)))
        return 1;

    auto prof = pmc::Profiler::from_env(); // PMC_PROFILE=FILE turns it on
    Tracer tracer(prof, db);
    const auto setup = prof.label("setup"), workload = prof.label("workload");
    Random rng{seed};
    std::int64_t checksum = 0;
    {
        auto s = prof.scope(setup);
        Statement add_account(db, "INSERT INTO accounts VALUES (NULL, ?, ?)");
        sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
        for (unsigned long long a = 0; a < accounts; ++a) add_account.run({static_cast<std::int64_t>(a), 1000});
        sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    }
    std::uint64_t counts[4] = {};
    {
        auto s = prof.scope(workload);
        Statement place(db, "INSERT INTO orders VALUES (NULL, ?, ?, 'new')");
        Statement sum(db, "SELECT count(*) + sum(amount) FROM orders WHERE account_id = ?");
        Statement ship(db, "UPDATE orders SET status = 'shipped' WHERE id = ?");
        Statement deposit(db, "UPDATE accounts SET balance = balance + ? WHERE id = ?");
        Statement begin(db, "BEGIN"), commit(db, "COMMIT");
        const auto n_accounts = static_cast<std::uint64_t>(accounts);
        std::int64_t orders = 0;
        begin.run({});
        for (unsigned long long k = 0; k < statements; ++k) {
            if (k % 1000 == 999) { // a transaction per 1000 statements
                commit.run({});
                begin.run({});
            }
            const std::int64_t account = 1 + rng.below(n_accounts), dice = rng.below(100);
            if (dice < 50 || orders == 0) {
                place.run({account, 1 + rng.below(200)});
                ++orders, ++counts[0];
            } else if (dice < 75) {
                checksum += sum.run({account});
                ++counts[1];
            } else if (dice < 90) {
                ship.run({1 + rng.below(static_cast<std::uint64_t>(orders))});
                ++counts[2];
            } else {
                deposit.run({50 + rng.below(500), account});
                known_work(1 + plant); // in the workload's own self value
                ++counts[3];
            }
        }
        commit.run({});
    }
    tracer.finish();
    sqlite3_stmt* alerts = nullptr;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM alerts", -1, &alerts, nullptr);
    sqlite3_trace_v2(db, 0, nullptr, nullptr);
    sqlite3_step(alerts);
    const std::int64_t n_alerts = sqlite3_column_int64(alerts, 0);
    sqlite3_finalize(alerts);
    sqlite3_close(db);
    std::printf("%llu statements%s: %llu orders placed, %llu sums, %llu shipped, %llu deposits; %lld overdraft "
                "alerts (checksum %lld)%s\n",
                statements, drop_index ? " without the index orders_by_account" : "",
                static_cast<unsigned long long>(counts[0]), static_cast<unsigned long long>(counts[1]),
                static_cast<unsigned long long>(counts[2]), static_cast<unsigned long long>(counts[3]),
                static_cast<long long>(n_alerts), static_cast<long long>(checksum),
                prof.enabled() ? "; profile written to $PMC_PROFILE: see pmc summarize" : "");
    return 0;
}
