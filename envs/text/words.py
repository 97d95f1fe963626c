"""Word lists of the word games: common English five-letter words, written for verigym."""

from __future__ import annotations

__all__ = ["FIVE_LETTER_WORDS"]

FIVE_LETTER_WORDS: tuple[str, ...] = tuple(
    sorted(
        set(
            """
            about above actor acute adapt admit adopt adult after again agent agree ahead alarm
            album alert alike alive allow alone along alter among angle angry apart apple apply
            arena argue arise armor array arrow aside asset audio avoid award aware badge baker
            basic beach began begin being below bench birth black blade blame blank blast blend
            block blood board boost booth bound brain brand brave bread break brick brief bring
            broad brown brush build bunch buyer cabin cable candy cargo carry catch cause chain
            chair chalk charm chart chase cheap check chess chest chief child chose civil claim
            class clean clear clerk click climb clock close cloud coach coast color couch could
            count court cover craft crane crash cream crime cross crowd crown curve cycle daily
            dance dealt death debut delay depth diary dirty doubt dozen draft drama drawn dream
            dress drink drive eager early earth eight elbow elite empty enemy enjoy enter entry
            equal error essay event exact exist extra faint faith false fault feast fence fiber
            field fifth fight final first flame flash fleet flesh float flood floor flour fluid
            focus force forth forty forum found frame fresh front frost fruit funny giant given
            glass globe glory grace grade grain grand grant grape grass grave great green greet
            grief gross group guard guess guest guide habit happy harsh heart heavy hello hence
            honey horse hotel house human humor ideal image imply index inner input issue joint
            judge juice knife knock label labor large laser later laugh layer learn lease least
            leave legal lemon level light limit linen liver local logic loose lover lower loyal
            lucky lunch magic major maker march match mayor medal media melon metal meter might
            minor mixed model money month moral motor mount mouse mouth movie music nerve never
            night noble noise north novel nurse ocean offer often olive onion opera orbit order
            other outer owner paint panel paper party pasta patch peace pearl phase phone photo
            piano piece pilot pitch place plain plane plant plate point polar pound power press
            price pride prime print prior prize proof proud prove pulse punch queen quick quiet
            quite radio raise range rapid ratio reach react ready realm rebel refer relax reply
            rider ridge right rigid rival river roast robot rough round route royal rural salad
            sauce scale scene scope score scout sense serve seven shade shake shape share sharp
            sheep sheet shelf shell shift shine shirt shock shore short shout sight skill skirt
            sleep slice slide smart smile smoke snake solid solve sound south space spare speak
            speed spend spice spine spoon sport staff stage stair stake stamp stand start state
            steam steel stick still stock stone store storm story stove straw strip study stuff
            style sugar suite sunny super sweet swing sword table taste teach thank theme thick
            thing think third throw tiger title toast today token tooth topic torch total touch
            tough tower trace track trade trail train treat trend trial tribe trick truck truly
            trust truth twist uncle under union unity upper urban usual valid value video virus
            visit vital vivid vocal voice waste watch water wheat wheel where white whole woman
            world worry worth would wound write wrong yield young youth zebra
            """.split()
        )
    )
)
"""Sorted, unique lowercase five-letter words (the answer and guess list of Wordle and Hangman)."""

if any(len(word) != 5 or not word.isalpha() for word in FIVE_LETTER_WORDS):  # pragma: no cover
    raise ValueError("FIVE_LETTER_WORDS must hold five-letter words only")
