// Text as a person deciding should see it: nothing hidden, nothing reordered, no look-alike letters unmarked.
// A port of src/signoff/core/visible.py, which the CLI uses; keep the two alike.
//
// What an approver reads is partly written by whoever asked: a description filled from the call's arguments,
// a recipient's name. `Pay 50 USD to \u202eokanaH` displays as "Hanako" (a right-to-left override reverses
// what follows), and a Cyrillic `а` in `Mаllory` passes for a Latin `a`. So every such text is shown with
// - format and control characters, line breaks and whitespace other than a plain space as `⟨U+202E⟩`;
// - a mark on a word whose letters come from more than one script: `⚠Mаllory`. Latin beside Chinese or
//   Japanese, and Japanese's own scripts together, are ordinary writing and not marked.

export const MARK = "⚠";

// Python's `\w`: letters, numbers and the underscore (combining marks split words there too).
const WORD = /[\p{L}\p{N}_]+/gu;
const LETTER = /\p{L}/u;
const HIDDEN = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}\u115f\u1160\u3164\uffa0]/u;
// Script_Extensions, not Script: the long-vowel mark of "タワー" is written in both kana, and in no one script.
const EAST_ASIAN = /[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}]/u;

// Python takes a letter's script from the first word of its Unicode name. For these letters that word is not
// their script's name, so Python counts them as a script of their own (fullwidth and mathematical letters,
// the Kelvin sign, modifier letters): `Ｈanako` and `𝐇anako` are marked there, and must be here.
const NAMED: Record<string, string> = {
  FULLWIDTH: "FF21-FF5A",
  MATHEMATICAL: "1D400-1D7CB",
  MODIFIER:
    "2B0-2C6 2C8-2EE 10FC 1D2C-1D61 1D78 1D9B-1DBF 2C7D A69C-A69D A717-A71F A770 A788 A7F2-A7F4 A7F8-A7F9 " +
    "AB5C-AB5F AB69 10780-107BA 1E030-1E06D",
  SUPERSCRIPT: "2071-207F",
  "DOUBLE-STRUCK": "2102 210D 2115-211A 211D-2124 213C-2149",
  SCRIPT: "210A-210B 2110 2112-2113 211B 212C 212F-2131 2133-2134",
  "BLACK-LETTER": "210C 2111 211C 2128 212D",
  KELVIN: "212A",
  ANGSTROM: "212B",
  OHM: "2126",
  PLANCK: "210E-210F",
  EULER: "2107",
  TURNED: "2132 214E",
  ROMAN: "2183",
  ALEF: "2135",
  BET: "2136",
  GIMEL: "2137",
  DALET: "2138",
  INFORMATION: "2139",
  FEMININE: "AA",
  MASCULINE: "BA",
  MICRO: "B5",
  CARON: "2C7",
  VEDIC: "1CE9-1CFA",
  VERTICAL: "2E2F 3031-303B",
  MASU: "303C",
  HENTAIGANA: "1B002-1B11E",
  // letters of no one script whose names give theirs
  Greek: "374",
  Arabic: "640",
  Javanese: "A9CF",
};

const NAMED_RANGES: [number, number, string][] = Object.entries(NAMED).flatMap(([word, ranges]) =>
  ranges.split(" ").map((range): [number, number, string] => {
    const [first, last = first] = range.split("-").map((hex) => parseInt(hex, 16));
    return [first, last, word];
  }),
);

// Every script of Unicode 17. One the browser does not know yet is left out: its letters are unassigned
// (hidden) there anyway.
const SCRIPT_NAMES = `
Latin Cyrillic Greek Armenian Georgian Cherokee Coptic Hebrew Arabic Syriac Thaana Nko Samaritan Mandaic
Devanagari Bengali Gurmukhi Gujarati Oriya Tamil Telugu Kannada Malayalam Sinhala Thai Lao Tibetan Myanmar
Ethiopic Canadian_Aboriginal Ogham Runic Tagalog Hanunoo Buhid Tagbanwa Khmer Mongolian Limbu Tai_Le New_Tai_Lue
Buginese Tai_Tham Balinese Sundanese Batak Lepcha Ol_Chiki Glagolitic Tifinagh Bopomofo Yi Lisu Vai Bamum
Syloti_Nagri Phags_Pa Saurashtra Kayah_Li Rejang Javanese Cham Tai_Viet Meetei_Mayek Linear_B Lycian Carian
Old_Italic Gothic Old_Permic Ugaritic Old_Persian Deseret Shavian Osmanya Osage Elbasan Caucasian_Albanian
Vithkuqi Linear_A Cypriot Imperial_Aramaic Palmyrene Nabataean Hatran Phoenician Lydian Meroitic_Hieroglyphs
Meroitic_Cursive Kharoshthi Old_South_Arabian Old_North_Arabian Manichaean Avestan Inscriptional_Parthian
Inscriptional_Pahlavi Psalter_Pahlavi Old_Turkic Old_Hungarian Hanifi_Rohingya Yezidi Old_Sogdian Sogdian
Old_Uyghur Chorasmian Elymaic Brahmi Kaithi Sora_Sompeng Chakma Mahajani Sharada Khojki Multani Khudawadi
Grantha Newa Tirhuta Siddham Modi Takri Ahom Dogra Warang_Citi Dives_Akuru Nandinagari Zanabazar_Square Soyombo
Pau_Cin_Hau Bhaiksuki Marchen Masaram_Gondi Gunjala_Gondi Makasar Kawi Cuneiform Cypro_Minoan
Egyptian_Hieroglyphs Anatolian_Hieroglyphs Bassa_Vah Pahawh_Hmong Medefaidrin Miao Tangut Khitan_Small_Script
Nushu Duployan SignWriting Nyiakeng_Puachue_Hmong Toto Wancho Nag_Mundari Mende_Kikakui Adlam Mro Tangsa Braille
Todhri Garay Tulu_Tigalari Sunuwar Gurung_Khema Kirat_Rai Ol_Onal Sidetic Tolong_Siki Beria_Erfe Tai_Yo Han
Hiragana Katakana Hangul Common Inherited`;

const SCRIPTS: [string, RegExp][] = SCRIPT_NAMES.trim().split(/\s+/).flatMap((name): [string, RegExp][] => {
  try {
    return [[name, new RegExp(`\\p{Script=${name}}`, "u")]];
  } catch {
    return []; // a script newer than this browser
  }
});

/** Whether `char` displays as nothing, or changes how its neighbours display, or passes for a space. */
export function hidden(char: string): boolean {
  return char !== " " && HIDDEN.test(char);
}

const scriptOf = new Map<string, string | undefined>();

/** The script a letter is written in, as Python names it (East Asian scripts as one); none for anything but a
 * letter. */
export function script(char: string): string | undefined {
  if (scriptOf.has(char)) return scriptOf.get(char);
  let found: string | undefined;
  if (LETTER.test(char)) {
    const code = char.codePointAt(0) ?? 0;
    found =
      NAMED_RANGES.find(([first, last]) => first <= code && code <= last)?.[2] ??
      (EAST_ASIAN.test(char) ? "EAST ASIAN" : SCRIPTS.find(([, pattern]) => pattern.test(char))?.[0]) ??
      "unknown";
  }
  scriptOf.set(char, found);
  return found;
}

export function mixed(word: string): boolean {
  const scripts = new Set<string>();
  for (const char of word) {
    const found = script(char);
    if (found !== undefined) scripts.add(found);
  }
  if (scripts.has("EAST ASIAN")) scripts.delete("Latin");
  return scripts.size > 1;
}

const spelled = (char: string): string =>
  `⟨U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}⟩`;

/** `text` with hidden characters spelled out and mixed-script words marked. */
export function reveal(text: string): string {
  let shown = "";
  for (const char of text) shown += hidden(char) ? spelled(char) : char;
  return shown.replace(WORD, (word) => (mixed(word) ? MARK + word : word));
}
