"""Generate the fidelity set (``compat/eval_cases/fidelity``): long conversations, English and
Chinese, with planted typed facts — names, numbers with units, dates, identifiers, file paths,
URLs, decisions, and later corrections of earlier facts — laid out so that the facts enter the
running summary at fold depths from 1 to past 10 under the set's policy.

Deterministic (no randomness, no downloads), license-clean (every sentence is written here).
Run: ``python scripts/make_fidelity_set.py`` (rewrites the files; CI checks they are current).
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "compat" / "eval_cases" / "fidelity"
POLICY = {"max_tokens": 400, "keep_tokens": 200}
TURNS = 96
FACT_EVERY = 6  # a fact every sixth turn, the whole way: they fold at every depth

FACTS = {
    "en": [
        ("name", "The project owner is Marguerite Okafor.", "Marguerite Okafor", "Who owns the project?"),
        ("number", "Peak load last quarter was 1840 requests per second.", "1840 requests per second", "What was last quarter's peak load?"),
        ("date", "The freeze starts on 2027-03-14.", "2027-03-14", "When does the freeze start?"),
        ("identifier", "The incident ticket is INC-70412.", "INC-70412", "Which ticket tracks the incident?"),
        ("path", "The config lives at /etc/ledgerd/shards.toml.", "/etc/ledgerd/shards.toml", "Where is the config file?"),
        ("url", "The runbook is at https://wiki.example.org/runbooks/ledgerd-failover.", "https://wiki.example.org/runbooks/ledgerd-failover", "Where is the runbook?"),
        ("decision", "Decision: we keep PostgreSQL and drop the Cassandra plan.", "drop the Cassandra plan", "What did we decide about Cassandra?"),
        ("number", "The budget is 42000 euros for the migration.", "42000 euros", "What is the migration budget?"),
        ("email", "Escalations go to oncall-ledger@example.org.", "oncall-ledger@example.org", "Where do escalations go?"),
        ("identifier", "The service account is svc-ledger-07.", "svc-ledger-07", "Which service account runs it?"),
        ("number", "Replication lag must stay under 250 ms.", "250 ms", "What is the replication lag bound?"),
        ("name", "The database reviewer is Tomasz Wierzbicki.", "Tomasz Wierzbicki", "Who reviews the database changes?"),
        ("path", "Backups are written to /var/backups/ledgerd/nightly.", "/var/backups/ledgerd/nightly", "Where are backups written?"),
        ("date", "The audit is due on 2027-05-02.", "2027-05-02", "When is the audit due?"),
        ("decision", "Decision: retries use exponential backoff capped at 30 seconds.", "capped at 30 seconds", "How are retries capped?"),
        ("identifier", "The feature flag is ledger.v2.shadow_reads.", "ledger.v2.shadow_reads", "Which flag gates shadow reads?"),
    ],
    "zh": [
        ("name", "项目负责人是欧阳明远。", "欧阳明远", "项目负责人是谁？"),
        ("number", "上季度峰值是每秒1840个请求。", "1840", "上季度峰值是多少？"),
        ("date", "冻结期从2027-03-14开始。", "2027-03-14", "冻结期什么时候开始？"),
        ("identifier", "事故工单号是INC-70412。", "INC-70412", "哪个工单跟踪这次事故？"),
        ("path", "配置文件在/etc/ledgerd/shards.toml。", "/etc/ledgerd/shards.toml", "配置文件在哪里？"),
        ("url", "操作手册在https://wiki.example.org/runbooks/ledgerd-failover。", "https://wiki.example.org/runbooks/ledgerd-failover", "操作手册在哪里？"),
        ("decision", "决定：保留PostgreSQL，放弃Cassandra方案。", "放弃Cassandra方案", "关于Cassandra的决定是什么？"),
        ("number", "迁移预算是42000欧元。", "42000欧元", "迁移预算是多少？"),
        ("email", "升级处理发到oncall-ledger@example.org。", "oncall-ledger@example.org", "升级处理发到哪里？"),
        ("identifier", "服务账号是svc-ledger-07。", "svc-ledger-07", "哪个服务账号运行它？"),
        ("number", "复制延迟必须低于250毫秒。", "250毫秒", "复制延迟的上限是多少？"),
        ("name", "数据库评审人是司马青云。", "司马青云", "谁评审数据库变更？"),
        ("path", "备份写到/var/backups/ledgerd/nightly。", "/var/backups/ledgerd/nightly", "备份写到哪里？"),
        ("date", "审计截止日期是2027-05-02。", "2027-05-02", "审计截止日期是哪天？"),
        ("decision", "决定：重试采用指数退避，上限30秒。", "上限30秒", "重试的上限是多少？"),
        ("identifier", "功能开关是ledger.v2.shadow_reads。", "ledger.v2.shadow_reads", "哪个开关控制影子读？"),
    ],
}
# later corrections of planted facts: (index of the fact, the corrected sentence, its value)
CORRECTIONS = {
    "en": [(1, "Correction: peak load last quarter was 2210 requests per second, not 1840.", "2210 requests per second"),
           (7, "Correction: the migration budget is 48500 euros, not 42000.", "48500 euros")],
    "zh": [(1, "更正：上季度峰值是每秒2210个请求，不是1840。", "2210"),
           (7, "更正：迁移预算是48500欧元，不是42000。", "48500欧元")],
}
ACK = {"en": "Noted.", "zh": "记下了。"}
FILLER = {
    "en": ["Let us go through the rollout steps once more before the review.",
           "The dashboards look calm today; latency is flat across the regions.",
           "Can you remind me how the staging environment differs from production?",
           "We should write down the open questions for Thursday's meeting.",
           "The new engineers asked for a short tour of the ledger services.",
           "I read the postmortem draft; the timeline section needs more detail."],
    "zh": ["评审之前我们再过一遍发布步骤。",
           "今天的监控面板很平稳，各区域延迟都很平。",
           "提醒我一下预发布环境和生产环境有什么不同？",
           "我们应该把周四会议要讨论的问题记下来。",
           "新来的工程师想简单了解一下账本服务。",
           "我看了复盘草稿，时间线部分还需要更多细节。"],
}
REPLY = {
    "en": ["Sure, here is a short recap of that, step by step, with the usual caveats.",
           "Agreed; I will keep an eye on it and report anything unusual."],
    "zh": ["好的，我按步骤简单回顾一下，并说明常见的注意事项。",
           "同意，我会继续关注，有异常就汇报。"],
}


def build(lang: str) -> tuple[list[dict], dict]:
    thread = f"fidelity_{lang}"
    lines: list[dict] = []
    facts: list[dict] = []
    corrections = {at: (text, value) for at, text, value in CORRECTIONS[lang]}
    planted = 0
    pending: list[tuple[int, str, str]] = []  # (turn, fact index, text, value) of corrections
    for turn in range(TURNS):
        if turn % FACT_EVERY == 0 and planted < len(FACTS[lang]):
            kind, text, value, question = FACTS[lang][planted]
            facts.append({"id": planted, "kind": kind, "turn": turn, "value": value,
                          "question": question})
            if planted in corrections:  # corrected 24 turns later
                pending.append((turn + 24, planted, *corrections[planted]))
            human, ai = text, ACK[lang]
            planted += 1
        elif pending and pending[0][0] <= turn:
            _, index, text, value = pending.pop(0)
            facts[index]["corrected"] = {"turn": turn, "value": value}
            human, ai = text, ACK[lang]
        else:
            human = FILLER[lang][turn % len(FILLER[lang])]
            ai = REPLY[lang][turn % len(REPLY[lang])]
        lines.append({"thread_id": thread, "role": "human", "content": human})
        lines.append({"thread_id": thread, "role": "ai", "content": ai})
    meta = {"name": thread, "language": lang, "policy": POLICY, "turns": TURNS,
            "facts": facts, "note": "16 facts, 2 corrected: fewer than the default summary cap "
            "holds (each is one short sentence)"}
    return lines, meta


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for lang in FACTS:
        lines, meta = build(lang)
        (OUT / f"fidelity_{lang}.jsonl").write_text(
            "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines),
            encoding="utf-8")
        (OUT / f"fidelity_{lang}.json").write_text(
            json.dumps(meta, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
