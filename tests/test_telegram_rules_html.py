"""Golden cases for Telegram's HTML parse mode (bot.telegram_rules.html and .text), each with its source.

- "td:LINE": tdlib's own parser tests, test/message_entities.cpp at tdlib/td commit 022d60202e44 (TEST
  MessageEntities.parse_html), the parser the Bot API server runs (parseTextEntities). tdlib's entities are
  written here in the Bot API's shape, as telegram-bot-api's JsonEntity writes them (PreCode is a "pre" with a
  "language", TextUrl a "text_link", CustomEmoji a "custom_emoji" with its id as a string, FormattedDate a
  "date_time" with "unix_time" and "date_time_format").
- "api:SECTION": the Bot API documentation, core.telegram.org/bots/api, section #html-style or #formatting-options.
- "fix:FUNCTION": what tdlib does to the entities when the message is stored (td/telegram/MessageEntity.cpp at the
  same commit: fix_formatted_text, line 4477, and the fix_entities, split_entities and remove_intersecting_entities
  it calls, lines 4403, 4315 and 1628), which the Bot API documentation states as nesting rules.

tdlib keeps a stray "&" as a literal; the parser does too with strict_ampersand=False, which the tdlib cases use.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.telegram_rules.html import HtmlError, checked_link, parse_html
from bot.telegram_rules.text import stored

Entity = dict[str, Any]


def e(kind: str, offset: int, length: int, **extra: Any) -> Entity:
    return {"type": kind, "offset": offset, "length": length, **extra}


def at(text: str, part: str, start: int = 0) -> tuple[int, int]:
    """(offset, length) of ``part`` in ``text``, in UTF-16 code units: worked out apart from the parser."""
    index = text.index(part, start)
    return len(text[:index].encode("utf-16-le")) // 2, len(part.encode("utf-16-le")) // 2


ARROWS = "➡️ ➡️"  # 5 UTF-16 code units
STADIUMS = "🏟 🏟"  # 5 UTF-16 code units, 9 UTF-8 bytes
SURROGATES = (
    "Text contains invalid Unicode characters after decoding HTML entities, check for unmatched surrogate code units"
)

# (source, html, text, entities)
TDLIB_PARSED = [
    ("td:1287", "", "", []),
    ("td:1288", ARROWS, ARROWS, []),
    ("td:1289", "&ge;&lt;&gt;&amp;&quot;&laquo;&raquo;&#12345678;", '&ge;<>&"&laquo;&raquo;&#12345678;', []),
    ("td:1290", "&Or;", "&Or;", []),
    ("td:1291", f"{ARROWS}<i>{ARROWS}</i>", ARROWS * 2, [e("italic", 5, 5)]),
    ("td:1292", f"{ARROWS}<em>{ARROWS}</em>", ARROWS * 2, [e("italic", 5, 5)]),
    ("td:1293", f"{ARROWS}<b>{ARROWS}</b>", ARROWS * 2, [e("bold", 5, 5)]),
    ("td:1294", f"{ARROWS}<strong>{ARROWS}</strong>", ARROWS * 2, [e("bold", 5, 5)]),
    ("td:1295", f"{ARROWS}<u>{ARROWS}</u>", ARROWS * 2, [e("underline", 5, 5)]),
    ("td:1296", f"{ARROWS}<ins>{ARROWS}</ins>", ARROWS * 2, [e("underline", 5, 5)]),
    ("td:1297", f"{ARROWS}<s>{ARROWS}</s>", ARROWS * 2, [e("strikethrough", 5, 5)]),
    ("td:1298", f"{ARROWS}<strike>{ARROWS}</strike>", ARROWS * 2, [e("strikethrough", 5, 5)]),
    ("td:1299", f"{ARROWS}<del>{ARROWS}</del>", ARROWS * 2, [e("strikethrough", 5, 5)]),
    ("td:1300", f"{ARROWS}<blockquote>{ARROWS}</blockquote>", ARROWS * 2, [e("blockquote", 5, 5)]),
    (
        "td:1301",
        f"{ARROWS}<i>{ARROWS}</i><b>{ARROWS}</b>",
        ARROWS * 3,
        [e("italic", 5, 5), e("bold", 10, 5)],
    ),
    ("td:1303", f"{STADIUMS}<i>🏟 &lt🏟</i>", f"{STADIUMS}🏟 <🏟", [e("italic", 5, 6)]),
    (
        "td:1304",
        f"{STADIUMS}<i>🏟 &gt;<b aba   =   caba>&lt🏟</b></i>",
        f"{STADIUMS}🏟 ><🏟",
        [e("italic", 5, 7), e("bold", 9, 3)],
    ),
    ("td:1306", f"{STADIUMS}&lt;<i    aba  =  190azAz-.   >a</i>", f"{STADIUMS}<a", [e("italic", 6, 1)]),
    ("td:1307", f"{STADIUMS}&lt;<i    aba  =  190azAz-.>a</i>", f"{STADIUMS}<a", [e("italic", 6, 1)]),
    ("td:1308", f'{STADIUMS}&lt;<i    aba  =  "&lt;&gt;&quot;">a</i>', f"{STADIUMS}<a", [e("italic", 6, 1)]),
    ("td:1310", f"{STADIUMS}&lt;<i    aba  =  '&lt;&gt;&quot;'>a</i>", f"{STADIUMS}<a", [e("italic", 6, 1)]),
    ("td:1312", f"{STADIUMS}&lt;<i    aba  =  '&lt;&gt;&quot;'>a</>", f"{STADIUMS}<a", [e("italic", 6, 1)]),
    ("td:1314", f"{STADIUMS}&lt;<i>{STADIUMS}&lt;</>", f"{STADIUMS}<{STADIUMS}<", [e("italic", 6, 6)]),
    ("td:1315", f"{STADIUMS}&lt;<i>a</    >", f"{STADIUMS}<a", [e("italic", 6, 1)]),
    ("td:1316", f"{STADIUMS}&lt;<i>a</i   >", f"{STADIUMS}<a", [e("italic", 6, 1)]),
    ("td:1317", f"{STADIUMS}&lt;<b></b>", f"{STADIUMS}<", []),
    ("td:1318", "<i>\t</i>", "\t", [e("italic", 0, 1)]),
    ("td:1319", "<i>\r</i>", "\r", [e("italic", 0, 1)]),
    ("td:1320", "<i>\n</i>", "\n", [e("italic", 0, 1)]),
    (
        "td:1321",
        f'{ARROWS}<span class = "tg-spoiler">{ARROWS}</span><b>{ARROWS}</b>',
        ARROWS * 3,
        [e("spoiler", 5, 5), e("bold", 10, 5)],
    ),
    ("td:1323", f'{STADIUMS}<span class="tg-spoiler">🏟 &lt🏟</span>', f"{STADIUMS}🏟 <🏟", [e("spoiler", 5, 6)]),
    (
        "td:1325",
        f'{STADIUMS}<span class="tg-spoiler">🏟 &gt;<b aba   =   caba>&lt🏟</b></span>',
        f"{STADIUMS}🏟 ><🏟",
        [e("spoiler", 5, 7), e("bold", 9, 3)],
    ),
    (
        "td:1327",
        f"{ARROWS}<tg-spoiler>{ARROWS}</tg-spoiler><b>{ARROWS}</b>",
        ARROWS * 3,
        [e("spoiler", 5, 5), e("bold", 10, 5)],
    ),
    ("td:1329", f"{STADIUMS}<tg-spoiler>🏟 &lt🏟</tg-spoiler>", f"{STADIUMS}🏟 <🏟", [e("spoiler", 5, 6)]),
    (
        "td:1330",
        f"{STADIUMS}<tg-spoiler>🏟 &gt;<b aba   =   caba>&lt🏟</b></tg-spoiler>",
        f"{STADIUMS}🏟 ><🏟",
        [e("spoiler", 5, 7), e("bold", 9, 3)],
    ),
    ("td:1332", "<a href=telegram.org>\t</a>", "\t", [e("text_link", 0, 1, url="http://telegram.org/")]),
    ("td:1334", "<a href=telegram.org>\r</a>", "\r", [e("text_link", 0, 1, url="http://telegram.org/")]),
    ("td:1336", "<a href=telegram.org>\n</a>", "\n", [e("text_link", 0, 1, url="http://telegram.org/")]),
    (
        "td:1338",
        "<code><i><b> </b></i></code><i><b><code> </code></b></i>",
        "  ",
        [e("code", 0, 1), e("bold", 0, 1), e("italic", 0, 1), e("code", 1, 1), e("bold", 1, 1), e("italic", 1, 1)],
    ),
    ("td:1345", "<i><b> </b> <code> </code></i>", "   ", [e("italic", 0, 3), e("bold", 0, 1), e("code", 2, 1)]),
    ("td:1349", "<a href=telegram.org> </a>", " ", [e("text_link", 0, 1, url="http://telegram.org/")]),
    ("td:1351", '<a href  ="telegram.org"   > </a>', " ", [e("text_link", 0, 1, url="http://telegram.org/")]),
    ("td:1353", "<a   href=  'telegram.org'   > </a>", " ", [e("text_link", 0, 1, url="http://telegram.org/")]),
    (
        "td:1355",
        "<a   href=  'telegram.org?&lt;'   > </a>",
        " ",
        [e("text_link", 0, 1, url="http://telegram.org/?<")],
    ),
    ("td:1357", "<a> </a>", " ", []),
    ("td:1358", "<a>telegram.org </a>", "telegram.org ", []),
    ("td:1359", "<a>telegram.org</a>", "telegram.org", [e("text_link", 0, 12, url="http://telegram.org/")]),
    (
        "td:1361",
        "<a>https://telegram.org/asdsa?asdasdwe#12e3we</a>",
        "https://telegram.org/asdsa?asdasdwe#12e3we",
        [e("text_link", 0, 42, url="https://telegram.org/asdsa?asdasdwe#12e3we")],
    ),
    ("td:1363", f"{STADIUMS}&lt;<pre  >{STADIUMS}&lt;</>", f"{STADIUMS}<{STADIUMS}<", [e("pre", 6, 6)]),
    ("td:1364", f"{STADIUMS}&lt;<code >{STADIUMS}&lt;</>", f"{STADIUMS}<{STADIUMS}<", [e("code", 6, 6)]),
    (
        "td:1365",
        f"{STADIUMS}&lt;<pre><code>{STADIUMS}&lt;</code></>",
        f"{STADIUMS}<{STADIUMS}<",
        [e("pre", 6, 6), e("code", 6, 6)],
    ),
    (
        "td:1367",
        f'{STADIUMS}&lt;<pre><code class="language-">{STADIUMS}&lt;</code></>',
        f"{STADIUMS}<{STADIUMS}<",
        [e("pre", 6, 6), e("code", 6, 6)],
    ),
    (
        "td:1369",
        f'{STADIUMS}&lt;<pre><code class="language-fift">{STADIUMS}&lt;</></>',
        f"{STADIUMS}<{STADIUMS}<",
        [e("pre", 6, 6, language="fift")],
    ),
    (
        "td:1371",
        f'{STADIUMS}&lt;<code class="language-fift"><pre>{STADIUMS}&lt;</></>',
        f"{STADIUMS}<{STADIUMS}<",
        [e("pre", 6, 6, language="fift")],
    ),
    (
        "td:1373",
        f'{STADIUMS}&lt;<pre><code class="language-fift">{STADIUMS}&lt;</> </>',
        f"{STADIUMS}<{STADIUMS}< ",
        [e("pre", 6, 7), e("code", 6, 6)],
    ),
    (
        "td:1375",
        f'{STADIUMS}&lt;<pre> <code class="language-fift">{STADIUMS}&lt;</></>',
        f"{STADIUMS}< {STADIUMS}<",
        [e("pre", 6, 7), e("code", 7, 6)],
    ),
    (
        "td:1377",
        f'{ARROWS}<tg-emoji emoji-id = "12345">{ARROWS}</tg-emoji><b>{ARROWS}</b>',
        ARROWS * 3,
        [e("custom_emoji", 5, 5, custom_emoji_id="12345"), e("bold", 10, 5)],
    ),
    (
        "td:1380",
        f'{STADIUMS}<tg-emoji emoji-id="54321">🏟 &lt🏟</tg-emoji>',
        f"{STADIUMS}🏟 <🏟",
        [e("custom_emoji", 5, 6, custom_emoji_id="54321")],
    ),
    (
        "td:1382",
        f'{STADIUMS}<b aba   =   caba><tg-emoji emoji-id="1">🏟</tg-emoji>1</b>',
        f"{STADIUMS}🏟1",
        [e("bold", 5, 3), e("custom_emoji", 5, 2, custom_emoji_id="1")],
    ),
    *[
        (
            f"td:{line}",
            f'{ARROWS}<tg-time unix = "12345", format = "{letters}">{ARROWS}</tg-time><b>{ARROWS}</b>',
            ARROWS * 3,
            [e("date_time", 5, 5, unix_time=12345, date_time_format=shown), e("bold", 10, 5)],
        )
        # FormattedDate flags 1, 2, 4, 8, 16, 32, 32, 62 in tdlib, written back as telegram-bot-api's JsonEntity
        # writes them: day of week, then the date's precision, then the time's (short before long).
        for line, letters, shown in (
            (1385, "r", "r"),
            (1388, "t", "t"),
            (1391, "T", "T"),
            (1394, "d", "d"),
            (1397, "D", "D"),
            (1400, "w", "w"),
            (1403, "W", "w"),
            (1406, "tttTTdDwW", "wdt"),
        )
    ],
    (
        "td:1411",
        '<blockquote   cite="" askdlbas nasjdbaj nj12b3>a&lt;<pre  >b;</></>',
        "a<b;",
        [e("blockquote", 0, 4), e("pre", 2, 2)],
    ),
    (
        "td:1413",
        "<blockquote   expandable>a&lt;<pre  >b;</></>",
        "a<b;",
        [e("expandable_blockquote", 0, 4), e("pre", 2, 2)],
    ),
    (
        "td:1415",
        "<blockquote   expandable   asd>a&lt;<pre  >b;</></>",
        "a<b;",
        [e("expandable_blockquote", 0, 4), e("pre", 2, 2)],
    ),
    (
        "td:1417",
        "<blockquote   expandable=false>a&lt;<pre  >b;</></>",
        "a<b;",
        [e("expandable_blockquote", 0, 4), e("pre", 2, 2)],
    ),
]

# (source, html, Telegram's error after "can't parse entities: ")
TDLIB_REFUSED = [
    ("td:1270", "&#57311;", SURROGATES),
    ("td:1271", "&#xDFDF;", SURROGATES),
    ("td:1272", "&#xDFDF", SURROGATES),
    ("td:1273", f"{STADIUMS}&lt;<abacaba", "Unclosed start tag at byte offset 13"),
    ("td:1274", f"{STADIUMS}&lt;<abac aba>", 'Unsupported start tag "abac" at byte offset 13'),
    ("td:1275", f"{STADIUMS}&lt;<abac>", 'Unsupported start tag "abac" at byte offset 13'),
    ("td:1276", f"{STADIUMS}&lt;<i   =aba>", 'Empty attribute name in the tag "i" at byte offset 13'),
    ("td:1277", f"{STADIUMS}&lt;<i    aba>", 'Can\'t find end tag corresponding to start tag "i"'),
    ("td:1278", f"{STADIUMS}&lt;<i    aba  =  ", 'Unclosed start tag "i" at byte offset 13'),
    ("td:1279", f"{STADIUMS}&lt;<i    aba  =  190azAz-.,", "Unexpected end of name token at byte offset 27"),
    ("td:1280", f'{STADIUMS}&lt;<i    aba  =  "&lt;&gt;&quot;>', "Unclosed start tag at byte offset 13"),
    ("td:1281", f"{STADIUMS}&lt;<i    aba  =  '&lt;&gt;&quot;>", "Unclosed start tag at byte offset 13"),
    ("td:1282", f"{STADIUMS}&lt;</", "Unexpected end tag at byte offset 13"),
    ("td:1283", f"{STADIUMS}&lt;<b></b></", "Unexpected end tag at byte offset 20"),
    ("td:1284", f"{STADIUMS}&lt;<i>a</i   ", "Unclosed end tag at byte offset 17"),
    (
        "td:1285",
        f"{STADIUMS}&lt;<i>a</em   >",
        'Unmatched end tag at byte offset 17, expected "</i>", found "</em>"',
    ),
    (
        "td:1409",
        f'{ARROWS}<tg-time unix = "12345", format = "rt">{ARROWS}</tg-time><b>{ARROWS}</b>',
        "Invalid date format used",
    ),
    (
        "td:1410",
        f'{ARROWS}<tg-time unix = "12345", format = "ts">{ARROWS}</tg-time><b>{ARROWS}</b>',
        "Invalid date format used",
    ),
]


@pytest.mark.parametrize(("source", "html", "text", "entities"), TDLIB_PARSED, ids=[c[0] for c in TDLIB_PARSED])
def test_the_parser_gives_what_tdlib_gives(source, html, text, entities):
    assert parse_html(html, strict_ampersand=False) == (text, entities)


@pytest.mark.parametrize(("source", "html", "error"), TDLIB_REFUSED, ids=[c[0] for c in TDLIB_REFUSED])
def test_the_parser_refuses_what_tdlib_refuses_in_tdlibs_words(source, html, error):
    with pytest.raises(HtmlError) as refused:
        parse_html(html, strict_ampersand=False)
    assert str(refused.value) == error


# The Bot API documentation's examples (api:html-style), as Telegram stores each message.
NESTED = (
    '<b>bold <i>italic bold <s>italic bold strikethrough <span class="tg-spoiler">italic bold strikethrough '
    "spoiler</span></s> <u>underline italic bold</u></i> bold</b>"
)
NESTED_TEXT = "bold italic bold italic bold strikethrough italic bold strikethrough spoiler underline italic bold bold"


def test_the_documented_nesting_example():  # api:html-style, the fourth example
    text, entities = stored(NESTED)
    assert text == NESTED_TEXT
    # Where each entity begins, worked out from the text alone.
    italic, _ = at(NESTED_TEXT, "italic bold italic")
    strike, _ = at(NESTED_TEXT, "italic bold strikethrough italic")
    spoiler, spoiler_length = at(NESTED_TEXT, "italic bold strikethrough spoiler")
    underline, underline_length = at(NESTED_TEXT, "underline italic bold")
    end = len(NESTED_TEXT)
    # fix:split_entities cuts every bold, italic, underline, strikethrough and spoiler entity where another of
    # them begins, so Telegram keeps the nesting as pieces that never cross.
    assert entities == [
        e("bold", 0, italic),
        e("bold", italic, strike - italic),
        e("italic", italic, strike - italic),
        e("bold", strike, spoiler - strike),
        e("italic", strike, spoiler - strike),
        e("strikethrough", strike, spoiler - strike),
        e("bold", spoiler, underline - spoiler),
        e("italic", spoiler, underline - spoiler),
        e("strikethrough", spoiler, spoiler_length),
        e("spoiler", spoiler, spoiler_length),
        e("bold", underline, end - underline),
        e("italic", underline, underline_length),
        e("underline", underline, underline_length),
    ]


@pytest.mark.parametrize(
    ("source", "html", "text", "entities"),
    [
        ("api:html-style", "<b>bold</b>, <strong>bold</strong>", "bold, bold", [e("bold", 0, 4), e("bold", 6, 4)]),
        ("api:html-style", "<i>italic</i>, <em>italic</em>", "italic, italic", [e("italic", 0, 6), e("italic", 8, 6)]),
        (
            "api:html-style",
            "<u>underline</u>, <ins>underline</ins>",
            "underline, underline",
            [e("underline", 0, 9), e("underline", 11, 9)],
        ),
        (
            "api:html-style",
            "<s>strikethrough</s>, <strike>strikethrough</strike>, <del>strikethrough</del>",
            "strikethrough, strikethrough, strikethrough",
            [e("strikethrough", 0, 13), e("strikethrough", 15, 13), e("strikethrough", 30, 13)],
        ),
        (
            "api:html-style",
            '<span class="tg-spoiler">spoiler</span>, <tg-spoiler>spoiler</tg-spoiler>',
            "spoiler, spoiler",
            [e("spoiler", 0, 7), e("spoiler", 9, 7)],
        ),
        (
            "api:html-style",
            '<a href="http://www.example.com/">inline URL</a>',
            "inline URL",
            [e("text_link", 0, 10, url="http://www.example.com/")],
        ),
        (
            "api:html-style",
            '<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>',
            "👍",
            [e("custom_emoji", 0, 2, custom_emoji_id="5368324170671202286")],
        ),
        (
            "api:html-style",
            "<code>inline fixed-width code</code>",
            "inline fixed-width code",
            [e("code", 0, 23)],
        ),
        (
            "api:html-style",
            "<pre>pre-formatted fixed-width code block</pre>",
            "pre-formatted fixed-width code block",
            [e("pre", 0, 36)],
        ),
        (
            "api:html-style",
            '<pre><code class="language-python">pre-formatted fixed-width code block written in the Python programming'
            " language</code></pre>",
            "pre-formatted fixed-width code block written in the Python programming language",
            [e("pre", 0, 79, language="python")],
        ),
        (
            "api:html-style",
            "<blockquote>Block quotation started\nBlock quotation continued\nThe last line of the block quotation"
            "</blockquote>",
            "Block quotation started\nBlock quotation continued\nThe last line of the block quotation",
            [e("blockquote", 0, 86)],
        ),
        (
            "api:html-style",
            "<blockquote expandable>Expandable block quotation started\nExpandable block quotation continued"
            "</blockquote>",
            "Expandable block quotation started\nExpandable block quotation continued",
            [e("expandable_blockquote", 0, 71)],
        ),
        (
            "api:html-style",
            '<tg-time unix="1647531900" format="wDT">22:45 tomorrow</tg-time>',
            "22:45 tomorrow",
            [e("date_time", 0, 14, unix_time=1647531900, date_time_format="wDT")],
        ),
        # "All numerical HTML entities are supported."
        ("api:html-style", "&#128512; &#x1F600;", "😀 😀", []),
        # "The API currently supports only the following named HTML entities: &lt;, &gt;, &amp; and &quot;."
        ("api:html-style", "&lt;&gt;&amp;&quot;", '<>&"', []),
        # "Programming language can't be specified for standalone code tags."
        ("api:html-style", '<code class="language-python">x = 1</code>', "x = 1", [e("code", 0, 5)]),
        # "bold, italic, underline, strikethrough, and spoiler entities can contain and can be part of any other
        # entities, except pre and code" (api:formatting-options); fix:split_entities drops them there.
        ("api:formatting-options", "<pre><b>x</b></pre>", "x", [e("pre", 0, 1)]),
        ("api:formatting-options", "<code>a<i>b</i></code>", "ab", [e("code", 0, 2)]),
        (
            "api:formatting-options",
            "<b>a<code>b</code>c</b>",
            "abc",
            [e("bold", 0, 1), e("code", 1, 1), e("bold", 2, 1)],
        ),
        # "blockquote and expandable_blockquote entities can't be nested"; fix:remove_intersecting_entities.
        (
            "api:formatting-options",
            "<blockquote>a<blockquote>b</blockquote></blockquote>",
            "ab",
            [e("blockquote", 0, 2)],
        ),
        # "All other entities can't contain each other"; fix:remove_intersecting_entities keeps the outer one.
        (
            "api:formatting-options",
            '<a href="http://a.example/">x<code>y</code></a>',
            "xy",
            [e("text_link", 0, 2, url="http://a.example/")],
        ),
        # A code block inside <pre> without a language is one pre (tdlib's parser gives both, td:1365).
        ("fix:remove_intersecting_entities", "<pre><code>x</code></pre>", "x", [e("pre", 0, 1)]),
        # Entities of a kind that touch are merged (fix:split_entities).
        ("fix:split_entities", "<b>a</b><b>b</b>", "ab", [e("bold", 0, 2)]),
        # Spaces and line feeds around the text are trimmed, entities moved with it (fix_formatted_text).
        ("fix:fix_formatted_text", "\n <b>x</b> \n", "x", [e("bold", 0, 1)]),
    ],
)
def test_the_stored_message_follows_the_documented_rules(source, html, text, entities):
    assert stored(html) == (text, entities)


def test_a_mention_link_is_a_text_mention_of_a_known_user():  # api:html-style, the sixth example
    user = {"id": 123456789, "is_bot": False, "first_name": "Ada"}
    html = '<a href="tg://user?id=123456789">inline mention of a user</a>'
    known = stored(html, resolve_user={123456789: user}.get)
    assert known == ("inline mention of a user", [e("text_mention", 0, 24, user=user)])
    assert stored(html) == ("inline mention of a user", [])


@pytest.mark.parametrize(
    ("html", "error"),
    [
        # api:html-style: "All <, > and & symbols that are not a part of a tag or an HTML entity must be replaced".
        ("a & b", 'Character "&" must be escaped as "&amp;" at byte offset 2'),
        ("&nbsp;", 'Character "&" must be escaped as "&amp;" at byte offset 0'),
        # api:html-style: "Only the tags mentioned above are currently supported."
        ("<p>x</p>", 'Unsupported start tag "p" at byte offset 0'),
        ('<span class="x">y</span>', 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        # td:parse_html (line 3507 of MessageEntity.cpp): a custom emoji needs a non-zero id.
        ("<tg-emoji>x</tg-emoji>", "Invalid custom emoji identifier specified"),
    ],
)
def test_the_strict_mode_refuses_what_the_documentation_forbids(html, error):
    with pytest.raises(HtmlError) as refused:
        parse_html(html)
    assert str(refused.value) == error


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        # LinkManager::check_link_impl and parse_url (tdutils/td/utils/HttpUrl.cpp, line 47) at the same commit.
        ("telegram.org", "http://telegram.org/"),
        ("HTTPS://Telegram.ORG/Path?Q", "https://telegram.org/Path?Q"),
        ("http://user:pw@example.com:8080", "http://user:pw@example.com:8080/"),
        ("tg://resolve?domain=durov", "tg://resolve?domain=durov"),
        ("example", None),  # a host without a dot
        ("ftp://example.com", None),  # only http and https
        ("http://example.com:99999/", None),
        ("http://exa mple.com/", None),
    ],
)
def test_a_links_address_is_kept_as_tdlib_checks_it(url, kept):
    assert checked_link(url) == kept
