#!/usr/bin/env python3
"""Long two-speaker conversations with dated sessions, and questions about them (issue 49).

Writes `klaw-memory/tests/data/long/<name>.jsonl` (one turn a line: id, session, speaker,
text, created_at, as `memory import` reads them) and `<name>.questions.json` (q, category,
evidence: the ids of the turns that answer it, paraphrased: whether the question avoids
the evidence's words). Deterministic for a given --seed; no model, no network.

Each conversation: 16 dated sessions two to three weeks apart, 300+ turns. Facts are
stated once (by one of the two speakers, about themselves or someone they know) and
asked about: `single` (one fact), `temporal` (when it happened: the answer is the
session's date, the turn says "today"), `multi` (two turns in different sessions, or a
question and its answer), `preference` (stated once in the first sessions). Distractors
are the same templates with other values (the other speaker, another relative), later
mentions of the same topic that do not answer, and small talk over the same topics, so a
question's words are found in many turns.

Usage: python3 scripts/gen_long_conversations.py [--seed 49] [--out DIR]
"""

import argparse
import datetime as dt
import json
import os
import random

SESSIONS = 16
TURNS_PER_SESSION = 20  # before the facts are added


# ---------------------------------------------------------------- English material

EN = {
    "relatives": [
        ("sister", "she"), ("brother", "he"), ("cousin", "she"), ("neighbour", "he"),
        ("colleague", "she"), ("flatmate", "he"), ("aunt", "she"), ("uncle", "he"),
        ("best friend", "she"), ("boss", "he"), ("niece", "she"), ("nephew", "he"),
    ],
    "she": ["Lucy", "Hannah", "Grace", "Ruth", "Martha", "Nora", "Zoe", "Clara", "Iris",
            "Esther", "Mei", "Fatima", "Alice", "Maria", "Ingrid", "Yasmin", "Beth",
            "Rosa", "Joy", "Anya"],
    "he": ["Tom", "Oliver", "Sam", "Leo", "Felix", "Isaac", "Adam", "Hugo", "Jonah",
           "Ravi", "Karl", "Owen", "Milo", "Ethan", "Arjun", "Callum", "Dev", "Luca",
           "Noah", "Pete"],
    "animals": [("dog", "puppy"), ("cat", "kitten"), ("rabbit", "bunny"),
                ("parrot", "bird"), ("hamster", "little furball")],
    "pets": ["Pepper", "Mochi", "Biscuit", "Luna", "Waffles", "Ziggy", "Pickle",
             "Nacho", "Olive", "Bean", "Toffee", "Rocket"],
    "jobs": [("nurse", "hospital ward"), ("architect", "design studio"),
             ("pharmacist", "chemist"), ("data analyst", "spreadsheets"),
             ("primary school teacher", "classroom"), ("paramedic", "ambulance crew"),
             ("sound engineer", "recording studio"), ("baker", "bakery"),
             ("translator", "agency"), ("electrician", "building sites")],
    "companies": ["Northwind", "Halden Labs", "Brightwater", "Copperleaf", "Marlowe & Co",
                  "Tidewell", "Oakridge Bank", "Fennick Studios"],
    "cities": ["Lisbon", "Porto", "Edinburgh", "Krakow", "Valencia", "Bergen", "Lyon",
               "Ljubljana", "Galway", "Tallinn", "Seville", "Bruges"],
    "cars": ["Skoda Octavia", "Toyota Yaris", "Volvo V60", "Honda Jazz", "Mazda 3",
             "Kia Ceed", "Renault Clio", "VW Golf"],
    "colors": ["dark blue", "silver", "red", "white", "green", "grey"],
    "allergens": ["penicillin", "cats", "peanuts", "shellfish", "birch pollen",
                  "latex", "sesame", "wasp stings"],
    "books": [("The Overstory", "Richard Powers"), ("Piranesi", "Susanna Clarke"),
              ("Middlemarch", "George Eliot"), ("The Dispossessed", "Ursula Le Guin"),
              ("Stoner", "John Williams"), ("Klara and the Sun", "Kazuo Ishiguro"),
              ("The Remains of the Day", "Kazuo Ishiguro"), ("Circe", "Madeline Miller")],
    "instruments": ["cello", "ukulele", "piano", "saxophone", "violin", "drums",
                    "mandolin", "harmonica"],
    "courses": ["pottery", "Spanish", "life drawing", "welding", "first aid",
                "Italian cooking", "photography", "sign language", "woodworking",
                "Japanese", "salsa", "bookbinding"],
    "areas": ["Hackney", "Clifton", "Leith", "Didsbury", "Headingley", "Roath",
              "Jesmond", "Totterdown"],
    "bands": ["Fontaines D.C.", "Arctic Monkeys", "Khruangbin", "Wet Leg",
              "Bon Iver", "Radiohead", "Little Simz", "The National"],
    "injuries": [("ankle", "football"), ("wrist", "climbing"), ("knee", "squash"),
                 ("shoulder", "swimming"), ("back", "gardening"), ("finger", "volleyball")],
    "foods": ["coriander", "olives", "mushrooms", "blue cheese", "aubergine",
              "anchovies", "liquorice", "beetroot", "celery", "oysters"],
    "seasons": ["autumn", "winter", "spring", "summer"],
    "drinks": ["green tea", "rooibos", "hot chocolate", "peppermint tea", "chai"],
    "genres": ["horror films", "musicals", "westerns", "documentaries", "rom-coms",
               "anime", "war films"],
    "teams": ["Liverpool", "Celtic", "Arsenal", "Leeds", "Everton", "Hibs"],
    "gifts": ["a record player", "a pasta machine", "a telescope", "a silk scarf",
              "a sourdough starter kit", "a pair of hiking boots", "a vintage camera",
              "a board game", "a fountain pen"],
    "races": [("10k", "44 minutes"), ("half marathon", "1 hour 58"),
              ("5k park run", "24 minutes"), ("marathon", "4 hours 12"),
              ("trail race", "2 hours 5")],
    "topics": ["work", "weather", "weekend", "cooking", "sleep", "money", "travel",
               "family", "tv", "health", "house", "garden"],
}


def en_small_talk(rng, me, other, m):
    """One line of small talk over the same topics as the facts (distractors)."""
    course = rng.choice(m["courses"])
    city = rng.choice(m["cities"])
    food = rng.choice(m["foods"])
    animal = rng.choice(m["animals"])[0]
    rel = rng.choice(m["relatives"])[0]
    name = rng.choice(m["she"] + m["he"])
    band = rng.choice(m["bands"])
    lines = [
        f"Work has been hectic, the quarterly report ate my whole week.",
        f"It rained all weekend so we stayed in and watched films.",
        f"I tried a new recipe with {food}, not sure I'd make it again.",
        f"Honestly I just need a holiday. Somewhere like {city} maybe.",
        f"My {rel} keeps sending me videos of {animal}s, it's an addiction.",
        f"Did you see the news about the trains? Another strike next week.",
        f"I've been sleeping badly, too much screen time I think.",
        f"We had {name} over for dinner, it went on until midnight.",
        f"Thinking about doing a {course} course at some point, no idea when.",
        f"The garden is a mess, the slugs ate everything again.",
        f"Money is tight this month, the boiler repair was brutal.",
        f"I keep meaning to read more, my pile of books just grows.",
        f"Someone at work was raving about {band}, have you heard them?",
        f"The landlord finally fixed the heating, only took three weeks.",
        f"I went for a long walk by the river, felt great afterwards.",
        f"My phone screen cracked again, I'm a disaster.",
        f"We're thinking about repainting the living room, maybe green.",
        f"The new cafe on the corner does amazing cinnamon buns.",
        f"I binge-watched a whole series on Sunday, zero regrets.",
        f"Traffic was horrendous this morning, forty minutes to go two miles.",
        f"My {rel} {name} is visiting next month, need to tidy the spare room.",
        f"Gym was packed tonight, I gave up and went home.",
        f"I booked a dentist appointment, finally. Dreading it.",
        f"Did I tell you the office is moving floors? Chaos.",
        f"How's your week been? Mine's been a blur.",
        f"Any plans for the weekend?",
        f"What have you been up to lately?",
        f"How is your {rel} doing these days?",
        f"Have you been to any concerts recently?",
        f"How's the {course} going, or did you never start?",
    ]
    return rng.choice(lines)


EN_REPLIES = [
    "Ha, that sounds about right.", "Oh no, that's rough.", "Nice, good for you!",
    "Same here honestly.", "Tell me more!", "That's brilliant.", "Ugh, I know the feeling.",
    "No way, really?", "Fair enough.", "Sounds lovely.", "Oh I'd love that.",
    "Haha, classic.", "Hope it gets better soon.", "Wow, okay.", "Let me know how it goes.",
]


def en_facts(rng, a, b, m):
    """Facts for speakers a and b: a list of (kind, statements, question, paraphrased,
    session constraint). statements: list of (speaker, text) placed in the given
    sessions order; distractor facts have question None."""
    facts = []
    rels = rng.sample(m["relatives"], len(m["relatives"]))
    pools = {}
    used = iter(range(10_000))

    def pick(key):
        """The next value of `key`: each value once before any repeats."""
        pool = pools.setdefault(key, [])
        if not pool:
            pool.extend(rng.sample(m[key], len(m[key])))
        return pool.pop()

    def person():
        rel, pron = rels[next(used) % len(rels)]
        return rel, pron, pick(pron)

    for rnd, (s, o) in enumerate([(a, b), (b, a)] * 2):
        own = rnd < 2
        # single: a relative's pet
        rel, pron, rn = person()
        young, grown = pick("animals")
        pet = pick("pets")
        facts.append(("single", [(s, f"My {rel} {rn} got a {young} last weekend, {pron} called it {pet}.")],
                      f"What is the name of {rn}'s {young}?", False))
        rel, pron, rn = person()
        young, grown = pick("animals")
        pet = pick("pets")
        facts.append(("single", [(s, f"{rn}, my {rel}, finally adopted a {young}. Named it {pet}, of all things.")],
                      f"What did {s}'s {rel} call the animal {pron} took in?", True))
        # single: a relative's job
        rel, pron, rn = person()
        job, place = pick("jobs")
        comp = pick("companies")
        facts.append(("single", [(s, f"{rn} just got a job as a {job} at {comp}, {pron}'s over the moon.")],
                      f"What does {rn} work as now?", False))
        # single: a car
        car, col = pick("cars"), pick("colors")
        if own:
            facts.append(("single", [(s, f"We finally bought a car! A second-hand {col} {car}, only 40,000 miles on it.")],
                          f"Which vehicle did {s} end up purchasing?", True))
        else:
            rel, pron, rn = person()
            facts.append(("single", [(s, f"{rn} bought a {col} {car} off a guy from work, {pron} is very proud of it.")],
                          f"What car did {rn} buy?", False))
        # single: allergy
        al = pick("allergens")
        if own:
            facts.append(("single", [(s, f"Turns out I'm allergic to {al}. The doctor confirmed it with a test.")],
                          f"What is {s} allergic to?", False))
        else:
            rel, pron, rn = person()
            facts.append(("single", [(s, f"Poor {rn} ended up in A&E, {pron} reacted badly to {al}.")],
                          f"What allergy sent {rn} to hospital?", True))
        # single: book
        book, author = pick("books")
        if own:
            facts.append(("single", [(s, f"I'm reading {book} by {author} at the moment, I can't put it down.")],
                          f"Which novel has {s} been unable to stop reading?", True))
        else:
            rel, pron, rn = person()
            facts.append(("single", [(s, f"My {rel} {rn} lent me {book}, {pron} says it changed {pron == 'she' and 'her' or 'his'} life.")],
                          f"Which book did {s} borrow from {rn}?", False))
        # single: instrument
        ins = pick("instruments")
        if own:
            facts.append(("single", [(s, f"I've been teaching myself the {ins}, twenty minutes every evening.")],
                          f"What instrument is {s} learning?", False))
        else:
            rel, pron, rn = person()
            facts.append(("single", [(s, f"{rn} plays the {ins} in a little folk band on Fridays.")],
                          f"What does {rn} play in the band?", False))
        # single: wedding city
        rel, pron, rn = person()
        city = pick("cities")
        facts.append(("single", [(s, f"We're flying to {city} in the spring, {rn} is getting married there.")],
                      f"Where is {rn}'s wedding taking place?", True))
        # temporal: course start
        course = pick("courses")
        facts.append(("temporal", [(s, f"First {course} class was this evening! The teacher is lovely and I made a total mess.")],
                      f"When did {s} start the {course} course?", False))
        course = pick("courses")
        facts.append(("temporal", [(s, f"Went to my very first {course} lesson today, I think I'm hooked.")],
                      f"When did {s} begin taking classes in {course}?", False))
        # temporal: moved
        area = pick("areas")
        facts.append(("temporal", [(s, f"We got the keys to the new flat in {area} today! Sitting on the floor eating chips.")],
                      f"When did {s} move to {area}?", False))
        # temporal: injury
        body, sport = pick("injuries")
        facts.append(("temporal", [(s, f"I twisted my {body} this morning playing {sport}, it's swollen like a balloon.")],
                      f"When did {s} get hurt doing {sport}?", True))
        # temporal: new job start
        comp = pick("companies")
        facts.append(("temporal", [(s, f"Today was my first day at {comp}. Everyone seems nice, the coffee is terrible.")],
                      f"When did {s} start working at {comp}?", False))
        # temporal: concert
        band = pick("bands")
        facts.append(("temporal", [(s, f"Just got home from seeing {band} live, my ears are still ringing.")],
                      f"When did {s} go to the {band} gig?", True))
        # preference (early)
        food, season, drink, genre, team = (pick(k) for k in ("foods", "seasons", "drinks", "genres", "teams"))
        if own:
            facts.append(("preference", [(s, f"Honestly I can't stand {food}, never could. It ruins any dish for me.")],
                          f"Which food does {s} dislike?", False))
            facts.append(("preference", [(s, f"{season.capitalize()} is my favourite time of year, the light is just better.")],
                          f"What time of year does {s} like most?", True))
            facts.append(("preference", [(s, f"I gave up coffee years ago, it's {drink} for me now, morning and night.")],
                          f"What does {s} drink instead of coffee?", False))
            facts.append(("preference", [(s, f"Put on {genre} and I'm happy, that's my kind of movie night.")],
                          f"What kind of films does {s} enjoy?", True))
            facts.append(("preference", [(s, f"I've supported {team} since I was six, my dad took me to every home game.")],
                          f"Which football club does {s} support?", False))
        else:
            rels2 = [person() for _ in range(5)]
            (r1, p1, n1), (r2, p2, n2), (r3, p3, n3), (r4, p4, n4), (r5, p5, n5) = rels2
            facts.append(("preference", [(s, f"Never cook {food} for {n1}, {p1} will pick every bit of it out.")],
                          f"What food does {n1} refuse to eat?", True))
            facts.append(("preference", [(s, f"My {r2} {n2} lives for {season}, {p2} says everything smells better then.")],
                          f"Which season is {n2}'s favourite?", True))
            facts.append(("preference", [(s, f"{n3} only ever orders {drink}, {p3} thinks coffee is poison.")],
                          f"What does {n3} always order?", False))
            facts.append(("preference", [(s, f"{n4} would watch {genre} every night if {p4} could.")],
                          f"What does {n4} love to watch?", False))
            facts.append(("preference", [(s, f"My {r5} {n5} is a mad {team} fan, season ticket and everything.")],
                          f"Which team is {n5} a fan of?", False))
        # multi: two turns in different sessions
        rel, pron, rn = person()
        city = pick("cities")
        job, place = pick("jobs")
        facts.append(("multi", [(s, f"My {rel} {rn} is moving to {city} next month, I'll miss {'her' if pron == 'she' else 'him'}."),
                                (s, f"{rn} has settled in well, {pron} started as a {job} last week.")],
                      f"What job does {s}'s {rel} who moved to {city} have?", False))
        race, time = pick("races")
        facts.append(("multi", [(s, f"I signed up for a {race} in the autumn, training starts now."),
                                (s, f"Did the race on Sunday! Finished in {time}, legs are dead.")],
                      f"What was {s}'s finishing time in the {race}?", False))
        # multi: a question and its answer (the answer alone does not say what it is)
        rel, pron, rn = person()
        gift = pick("gifts")
        facts.append(("multi", [(o, f"What did you end up getting {rn} for {'her' if pron == 'she' else 'his'} birthday?"),
                                (s, f"{gift.capitalize()}. Took me ages to decide.")],
                      f"What birthday present did {s} give {rn}?", True))
        city = pick("cities")
        if own:
            facts.append(("multi", [(o, "Where are you going for your holiday this year?"),
                                    (s, f"{city}, a week in June. Already booked the flights.")],
                          f"Where is {s} spending the summer holiday?", True))
    # distractor facts: the same templates with other values, never asked about
    distract = []
    for s in [a, b] * 6:
        rel, pron, rn = person()
        distract += [
            [(s, f"My {rel} {rn} wants a {pick('animals')[0]} but the landlord says no pets.")],
            [(s, f"The {pick('courses')} class was cancelled this week, the teacher is ill.")],
            [(s, f"I used to like {pick('foods')} as a kid, funny how taste changes.")],
            [(s, f"Someone at work is learning the {pick('instruments')} too, we compare notes.")],
            [(s, f"We might go to {pick('cities')} one day, it's on the list.")],
            [(s, f"{rn} is thinking about quitting {rel == 'boss' and 'management' or 'the job'} to retrain as a {pick('jobs')[0]}.")],
            [(s, f"The car needs an MOT again, it failed on the brakes last time.")],
            [(s, f"Tickets for {pick('bands')} sold out in minutes, no chance.")],
            [(s, f"I'm not much of a {pick('drinks')} person, but it was nice at the cafe.")],
            [(s, f"My {pick('injuries')[0]} still aches when it's cold.")],
        ]
    return facts, distract


# ---------------------------------------------------------------- Russian material

RU = {
    # (именительный, родительный) имён
    "names": [("Катя", "Кати"), ("Миша", "Миши"), ("Лена", "Лены"), ("Саша", "Саши"),
              ("Вера", "Веры"), ("Паша", "Паши"), ("Оля", "Оли"), ("Гоша", "Гоши"),
              ("Нина", "Нины"), ("Костя", "Кости"), ("Даша", "Даши"), ("Лёша", "Лёши")],
    "relatives": ["сестра", "брат", "двоюродная сестра", "соседка", "коллега", "подруга"],
    "rel_gen": {"сестра": "сестры", "брат": "брата", "двоюродная сестра": "двоюродной сестры",
                "соседка": "соседки", "коллега": "коллеги", "подруга": "подруги"},
    "animals": [("щенка", "собаку"), ("котёнка", "кошку"), ("попугая", "птицу"),
                ("кролика", "кролика")],
    "pets": ["Бублик", "Пломбир", "Ириска", "Кнопка", "Тишка", "Маруся", "Персик", "Чип"],
    "jobs": ["медсестрой", "архитектором", "фармацевтом", "учителем физики",
             "переводчиком", "электриком", "кондитером", "бухгалтером"],
    "cities": ["Казань", "Калининград", "Тбилиси", "Ереван", "Сочи", "Мурманск",
               "Иркутск", "Выборг"],
    "cities_pre": {"Казань": "Казани", "Калининград": "Калининграде", "Тбилиси": "Тбилиси",
                   "Ереван": "Ереване", "Сочи": "Сочи", "Мурманск": "Мурманске",
                   "Иркутск": "Иркутске", "Выборг": "Выборге"},
    "courses": ["гончарному делу", "испанскому", "рисованию", "фотографии",
                "итальянской кухне", "жестовому языку", "столярному делу", "вокалу"],
    "instruments": ["виолончели", "укулеле", "фортепиано", "саксофоне", "скрипке", "барабанах"],
    "foods": ["кинзу", "оливки", "грибы", "баклажаны", "печень", "сельдерей", "устрицы"],
    "drinks": ["зелёный чай", "ройбуш", "какао", "мятный чай", "цикорий"],
    "allergens": ["пенициллин", "кошек", "арахис", "пыльцу берёзы", "морепродукты"],
    "gifts": ["проигрыватель", "телескоп", "шёлковый платок", "настольную игру",
              "перьевую ручку", "походные ботинки"],
    "areas": ["Купчино", "Автово", "Сокольниках", "Академгородке", "Приморском районе"],
}

RU_GEN = {"Ольга": "Ольги", "Дмитрий": "Дмитрия"}

RU_REPLIES = [
    "Ха, узнаю тебя.", "Ой, сочувствую.", "Здорово, поздравляю!", "У меня так же, честно.",
    "Рассказывай!", "Вот это да.", "Понимаю тебя.", "Серьёзно?", "Ну и правильно.",
    "Звучит прекрасно.", "Держи в курсе.", "Ничего себе.", "Надеюсь, скоро наладится.",
]


def ru_small_talk(rng, me, other, m):
    course = rng.choice(m["courses"])
    city = rng.choice(m["cities"])
    food = rng.choice(m["foods"])
    name = rng.choice(m["names"])[0]
    lines = [
        "На работе завал, квартальный отчёт съел всю неделю.",
        "Все выходные лил дождь, сидели дома и смотрели кино.",
        f"Попробовала новый рецепт, там были {food}, не уверена, что повторю.",
        f"Мне нужен отпуск. Куда-нибудь вроде {m['cities_pre'][city]}, наверное.",
        "Опять забастовка на электричках, как добираться — непонятно.",
        "Сплю плохо, наверное, слишком много телефона перед сном.",
        f"У нас в гостях была {name}, засиделись до полуночи.",
        f"Всё думаю записаться на курсы по {course}, но когда — не знаю.",
        "На даче всё съели слизни, опять.",
        "Денег в этом месяце впритык, ремонт котла разорил.",
        "Стопка непрочитанных книг только растёт.",
        "Хозяин квартиры наконец починил отопление, всего-то три недели.",
        "Гуляла вдоль реки часа два, стало гораздо легче.",
        "Опять разбила экран телефона.",
        "Думаем перекрасить гостиную, может быть, в зелёный.",
        "В новой кофейне на углу потрясающие булочки с корицей.",
        "Утром пробка, сорок минут на три километра.",
        "Как неделя? У меня всё слилось в одно пятно.",
        "Какие планы на выходные?",
        "Как там твои курсы, или так и не начала?",
        "Как дела у родных?",
        "В зале сегодня не протолкнуться, ушла домой.",
    ]
    return rng.choice(lines)


def ru_facts(rng, a, b, m):
    facts = []
    names = rng.sample(m["names"], len(m["names"]))
    used = iter(range(10_000))

    pools = {}

    def person():
        i = next(used)
        return rng.choice(m["relatives"]), names[i % len(names)]

    def pick(key):
        """The next value of `key`: each value once before any repeats."""
        pool = pools.setdefault(key, [])
        if not pool:
            pool.extend(rng.sample(m[key], len(m[key])))
        return pool.pop()

    for s, o in [(a, b), (b, a)]:
        rel, (rn, rg) = person()
        young, grown = pick("animals")
        pet = pick("pets")
        facts.append(("single", [(s, f"Моя {rel} {rn} на выходных взяла {young}, назвала {pet}.") if rel not in ("брат", "коллега") else
                                 (s, f"Мой {rel} {rn} на выходных взял {young}, назвал {pet}.")],
                      f"Как зовут питомца {rg}?", True))
        rel, (rn, rg) = person()
        job = pick("jobs")
        facts.append(("single", [(s, f"{rn} устроилась работать {job}, счастлива невероятно.")],
                      f"Кем теперь работает {rn}?", False))
        al = pick("allergens")
        facts.append(("single", [(s, f"Оказалось, у меня аллергия на {al}. Врач подтвердил анализом.")],
                      f"На что аллергия у {RU_GEN[s]}?", False))
        ins = pick("instruments")
        facts.append(("single", [(s, f"Учусь сам играть на {ins}, по двадцать минут каждый вечер.")],
                      f"На каком инструменте учится играть {s}?", False))
        rel, (rn, rg) = person()
        city = pick("cities")
        facts.append(("single", [(s, f"Весной летим в {city}, {rn} там выходит замуж.")],
                      f"Где будет свадьба {rg}?", True))
        course = pick("courses")
        facts.append(("temporal", [(s, f"Сегодня было первое занятие по {course}! Преподаватель чудесный, я вся в глине и счастье.")],
                      f"Когда {s} начал(а) ходить на курсы по {course}?", False))
        area = pick("areas")
        facts.append(("temporal", [(s, f"Сегодня получили ключи от новой квартиры в {area}! Сидим на полу, едим пиццу.")],
                      f"Когда {s} переехал(а) в новую квартиру?", True))
        facts.append(("temporal", [(s, "Утром подвернул ногу на футболе, лодыжка распухла как мяч.")],
                      f"Когда {s} травмировал(а) лодыжку?", False))
        facts.append(("temporal", [(s, "Сегодня первый день на новой работе. Люди приятные, кофе ужасный.")],
                      f"Когда {s} вышел(ла) на новую работу?", False))
        food = pick("foods")
        facts.append(("preference", [(s, f"Терпеть не могу {food}, с детства. Портит любое блюдо.")],
                      f"Какую еду не любит {s}?", True))
        drink = pick("drinks")
        facts.append(("preference", [(s, f"Кофе я давно бросил(а), теперь только {drink}, утром и вечером.")],
                      f"Что пьёт {s} вместо кофе?", False))
        facts.append(("preference", [(s, "Горы мне всегда милее пляжа, на море я через день скучаю.")],
                      f"Какой отдых предпочитает {s}: море или горы?", False))
        rel, (rn, rg) = person()
        city = pick("cities")
        job = pick("jobs")
        facts.append(("multi", [(s, f"{rn} в следующем месяце переезжает в {city}, буду скучать."),
                                (s, f"{rn} отлично устроилась на новом месте, работает {job}.")],
                      f"Кем работает {rn} после переезда в {city}?", False))
        rel, (rn, rg) = person()
        gift = pick("gifts")
        facts.append(("multi", [(o, f"Что ты в итоге подарил(а) {rn[:-1]}е на день рождения?"),
                                (s, f"{gift.capitalize()}. Долго выбирал(а).")],
                      f"Какой подарок получил(а) от {RU_GEN[s]} {rn}?", True))
        city = pick("cities")
        facts.append(("multi", [(o, "Куда поедете в отпуск этим летом?"),
                                (s, f"В {city}, на неделю в июне. Билеты уже купили.")],
                      f"Куда {s} собирается летом?", True))
    # a third round for the speaker pair, to reach the question count
    for s in [a, b]:
        for _ in range(2):
            rel, (rn, rg) = person()
            job = pick("jobs")
            facts.append(("single", [(s, f"Знаешь, {rn} теперь работает {job}, кто бы мог подумать.")],
                          f"Какая сейчас профессия у {rg}?", True))
            course = pick("courses")
            facts.append(("temporal", [(s, f"Записалась и сегодня сходила на первое занятие по {course}, понравилось.")],
                          f"Когда {s} впервые сходил(а) на занятие по {course}?", False))
    distract = []
    for s in [a, b] * 5:
        rel, (rn, rg) = person()
        distract += [
            [(s, f"{rn} хочет {pick('animals')[1]}, но хозяин квартиры против.")],
            [(s, f"Занятие по {pick('courses')} на этой неделе отменили, преподаватель заболел.")],
            [(s, f"В детстве я любил(а) {pick('foods')}, странно, как меняется вкус.")],
            [(s, f"Может, когда-нибудь съездим в {pick('cities')}, он у нас в списке.")],
            [(s, f"{rn} думает уйти с работы и переучиться.")],
            [(s, "Лодыжка до сих пор ноет на холод.")],
            [(s, f"Я вообще-то не люблю {pick('drinks')}, но в кафе было вкусно.")],
        ]
    return facts, distract


# ---------------------------------------------------------------- assembly

def build(rng, name, a, b, start, lang):
    m = EN if lang == "en" else RU
    facts, distract = (en_facts if lang == "en" else ru_facts)(rng, a, b, m)
    # a question asked twice (the same template drew the same person) would have two
    # answers: keep the first fact only
    seen = set()
    facts = [f for f in facts if not (f[2] in seen or seen.add(f[2]))]
    small = en_small_talk if lang == "en" else ru_small_talk
    replies = EN_REPLIES if lang == "en" else RU_REPLIES
    # sessions: each a list of (speaker, text, fact index or None, part)
    # sessions: each a list of blocks; a block: consecutive (speaker, text, fact, part)
    sessions = [[] for _ in range(SESSIONS)]
    for fi, (kind, statements, _q, _p) in enumerate(facts):
        if kind == "preference":
            first = rng.randrange(0, 3)
        else:
            first = rng.randrange(0, SESSIONS - (4 if len(statements) > 1 else 0))
        if len(statements) > 1 and statements[0][0] != statements[1][0]:
            # a question and its answer: one after the other
            sessions[first].append([(st, fi, si) for si, st in enumerate(statements)])
            continue
        for si, st in enumerate(statements):
            sess = first if si == 0 else rng.randrange(first + 1, min(SESSIONS, first + 6))
            sessions[sess].append([(st, fi, si)])
    for d in distract:
        sessions[rng.randrange(0, SESSIONS)].append([(d[0], None, 0)])
    turns, questions = [], []
    evidence = {}
    day = start
    for sn in range(SESSIONS):
        blocks = sessions[sn]
        rng.shuffle(blocks)
        stream = []
        for block in blocks:
            stream.extend(block)
            # small talk between facts: a line of the other speaker, a reply
            for _ in range(rng.randrange(0, 2)):
                stream.append(None)
        while len(stream) < TURNS_PER_SESSION:
            stream.insert(rng.randrange(0, len(stream) + 1), None)
        t = dt.datetime.combine(day, dt.time(18 + rng.randrange(0, 4), rng.randrange(0, 60)),
                                tzinfo=dt.timezone.utc)
        sid = f"s{sn + 1}"
        last = b
        n = 0
        for it in stream:
            if it is None:
                sp = a if last == b else b
                text = small(rng, sp, last, m) if rng.random() < 0.6 else rng.choice(replies)
                fi = None
            else:
                (sp, text), fi, si = it
            if sp == last and it is not None and rng.random() < 0.7:
                # the other speaker says something short first, so turns alternate
                n += 1
                turns.append({"id": f"{sid}.{n:02d}", "session": sid, "speaker": a if sp == b else b,
                              "text": rng.choice(replies) if rng.random() < 0.5 else small(rng, None, None, m),
                              "created_at": t.isoformat()})
                t += dt.timedelta(minutes=rng.randrange(1, 4))
            n += 1
            tid = f"{sid}.{n:02d}"
            turns.append({"id": tid, "session": sid, "speaker": sp, "text": text,
                          "created_at": t.isoformat()})
            t += dt.timedelta(minutes=rng.randrange(1, 4))
            last = sp
            if it is not None and fi is not None:
                evidence.setdefault(fi, []).append((si, tid))
        day += dt.timedelta(days=rng.randrange(12, 24))
    for fi, (kind, statements, q, para) in enumerate(facts):
        ev = [tid for _si, tid in sorted(evidence[fi])]
        assert len(ev) == len(statements), (name, fi)
        questions.append({"q": q, "category": kind, "paraphrased": para, "evidence": ev})
    return turns, questions


CONVERSATIONS = [
    ("anna-ben-en", "Anna", "Ben", dt.date(2023, 1, 7), "en"),
    ("chloe-daniel-en", "Chloe", "Daniel", dt.date(2023, 3, 4), "en"),
    ("priya-marcus-en", "Priya", "Marcus", dt.date(2023, 9, 16), "en"),
    ("olga-dmitry-ru", "Ольга", "Дмитрий", dt.date(2023, 5, 13), "ru"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=49)
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--out", default=os.path.join(here, "..", "klaw-memory", "tests", "data", "long"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    total_t = total_q = 0
    for i, (name, a, b, start, lang) in enumerate(CONVERSATIONS):
        rng = random.Random(args.seed * 1000 + i)
        turns, questions = build(rng, name, a, b, start, lang)
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            for t in turns:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        with open(os.path.join(args.out, f"{name}.questions.json"), "w", encoding="utf-8") as f:
            json.dump(questions, f, ensure_ascii=False, indent=0)
            f.write("\n")
        total_t += len(turns)
        total_q += len(questions)
        print(f"{name}: {len(turns)} turns, {len(questions)} questions")
    print(f"all: {total_t} turns, {total_q} questions")


if __name__ == "__main__":
    main()
