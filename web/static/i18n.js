// The interface's own words, one table per language, chosen from the
// browser's language (English when there is no table for it). To add a
// language, add a table with the same keys; a missing key falls back to
// English. {name} in a string is replaced by the value of that name.
const STRINGS = {
  en: {
    polls: "Polls", noPolls: "No polls yet.", loading: "Loading…", connecting: "Connecting…",
    live: "Live", scheduled: "Starts soon", closed: "Closed", final: "Final result",
    votes_one: "{n} vote", votes_other: "{n} votes", watching_one: "{n} watching", watching_other: "{n} watching",
    perMinute: "{n} votes a minute",
    closesIn: "Closes in {d}", closesAt: "Closes {when}", opensIn: "Opens in {d}", closedAt: "Closed {when}",
    waitOpen: "The buttons wake up when voting opens.",
    tapToVote: "Tap an option to vote.", yourVote: "Your vote: {option} — tap another to change it.",
    voteClosed: "Voting has closed.", counting: "Counting the last votes…",
    late: "Your vote arrived after the close: it is kept, not counted.", notCounted: "Not counted: {reason}",
    outcomeUnknown: "We could not confirm that your vote was counted: the server did not give a clear answer for 30 seconds. Tap your choice again to be sure; a vote sent twice counts once.",
    tokenRefused: "Not counted: this phone's voting pass was refused on this network, and a new one was refused too. Reload the page to try again.",
    puzzleFailed: "Not counted: the check this phone solves before voting was refused three times. Reload the page to try again.",
    stampAhead: "Not counted: the server's clock disagreed with this phone's last vote. Tap your choice again to vote.",
    hiddenResults: "Results are hidden until the host reveals them. Your vote still counts.",
    winner: "Winner: {option}", tie: "Tie: {options}", and: " and ",
    leads: "{option} leads", overtakes: "{option} overtakes {passed}", milestone: "{n} votes!",
    certified: "Certified result", digest: "Digest", details: "Details",
    transport: "Connection: {t}", servedBy: "Served by region {r}", regionLive: "{r}: live", regionBehind: "{r}: {s} s behind",
    regionLost: "{r}: out of touch", reconnecting: "Reconnecting in {s} s…",
    scanToVote: "Scan to vote", today: "today at {t}",
    enterCodeAt: "or enter this code at {host}:", haveCode: "Have a code?", joinButton: "Join",
    noSuchCode: "No poll or quiz has the code {code}. Check it on the screen.", badCode: "A code is six letters and digits, as on the screen.",
    scanToJoin: "Scan to join", joinNow: "Join on your phone: the first question comes soon.", quizLobby: "Join now",
answersWord_one: "answer in", answersWord_other: "answers in", noAnswers: "No answers were counted.", newestJoined: "Newest to join",
    answerLocked: "Answer locked", lockedWait: "Wait for the reveal.", verdictRight: "Correct!", verdictWrong: "Not this time",
    pointsEarned: "+{n} points", rankNow: "Rank {rank} of {n}", yourVoteTag: "Your vote", nameRefused: "That name cannot be used ({why}); choose another.",
    hiddenAfter: "Results are hidden until the host reveals them.", resultsSoon: "Results after the reveal",
    votingClosed: "Voting has closed", others: "Others ({n})", showingOf: "showing {n} of {total} options",
    noSuchOptions: "no option {ids} in this poll: showing all", certifiedMark: "✓ Certified",
    localAddress: "This QR code points to {host}, which phones cannot reach. Start the node with --public-url.",
    guessedAddress: "The QR code uses this screen's address; set --public-url if viewers reach the node elsewhere.",
    host: "Host", adminToken: "Admin token", question: "Question", optionsPerLine: "Options, one per line",
    openFor: "Open for (seconds)", opensAtLabel: "Opens at (empty: now)", eventLabel: "Event (groups a show's polls; optional)",
    hideLabel: "Hide the results until I reveal them", create: "Create poll",
    closeNow: "Close now", reallyClose: "Close this poll now? Votes after this are not counted.", yesClose: "Yes, close it",
    cancel: "Cancel", extend: "Add {s} s", reveal: "Reveal the results", revealed: "Results are visible to everyone.",
    hiddenHost: "Hidden from viewers. You see the counts.", exportCSV: "Export CSV", exportJSON: "Export JSON",
    nextQuestion: "Next question: {q}", eventPolls: "Event {e}", finalCertified: "Final, certified result.",
    closedFinal: "Closed. Certifying…", presenter: "Presenter screen", overlay: "On-air overlay", embed: "Embed",
    quiz: "Quiz", quizWaiting: "Waiting for the host to start the quiz.", quizEnded: "The quiz is over.",
    questionOf: "Question {n} of {total}", secondsLeft: "{s} s left", timeUp: "Time is up.",
    answered: "Answer sent: {option}, in {s} s.", correct: "Correct! +{n} points.", incorrect: "Not this time: the answer was {answer}.",
    answerWas: "The answer was {answer}.", leaderboard: "Leaderboard", finalStandings: "Final standings",
    yourScore: "You: {score} points, rank {rank} of {n}.", points: "{n} points", rankUp: "▲ up {n}", rankDown: "▼ down {n}",
    tooLate: "Too late: the question had closed when your answer arrived. It does not count.",
    startNext: "Start the next question", closeQuestion: "Close the question", revealAnswer: "Reveal the answer",
    endQuiz: "End the quiz", questions: "Questions", skipped: "skipped (never asked)", hiddenShort: "answer hidden",
    studioPreview: "Studio screen preview", studioScreen: "Studio screen", hostKeys: "Keys: S start the next question · C close · R reveal · E end (twice).",
    tokenNeeded: "Enter the admin token to run this quiz (the node keeps it in its data directory, admin-token).", useToken: "Use this token",
    tokenNeededPoll: "Enter the admin token to run this poll (the node keeps it in its data directory, admin-token).",
    pressAgainToEnd: "Press E again within 3 seconds to end the quiz.", joined: "{n} joined", notStarted: "not started", participantPage: "Participants' page",
    quizState_ready: "Ready: {total} questions, none started.", quizState_question: "Question {n} of {total} is open.",
    quizState_between: "Question {n} of {total} is closed.", quizState_ended: "The quiz is over.",
    yourName: "Your name on the leaderboard", anonymous: "Anonymous",
    receiptChecking: "Checking your vote against the certified result…",
    receiptCounted: "Your vote is in the certified result ✓", receiptProof: "See the proof",
    receiptSuperseded: "Replaced by your later vote for {option}, which counts ✓",
    receiptLate: "Your vote arrived after the close: it is in the record, not counted.",
    receiptFiltered: "Your vote is in the record but was not counted: the vote checks set it aside.",
    receiptRepeat: "Not counted: an earlier vote with the same key stands in its place.",
    receiptUnknown: "Your vote is not in the certified result: the server has no record of it.",
    receiptUnchecked: "Your vote could not be checked: {why}.",
    receiptStep_malformed: "the receipt or its proof is damaged", receiptStep_signature: "the receipt's signature is not the server's",
    receiptStep_certificate: "the proof is not the certified result's", receiptStep_record: "the proof's record is not your vote",
    receiptStep_path: "the proof does not lead into the result", receiptStep_root: "the proof leads to another result than the certified one",
    receiptStep_pending: "the result's proofs are not ready yet", receiptStep_network: "the server did not answer",
    receiptStep_unsupported: "this browser cannot check signatures over this connection",
  },
  es: {
    polls: "Encuestas", noPolls: "Todavía no hay encuestas.", loading: "Cargando…", connecting: "Conectando…",
    live: "En directo", scheduled: "Empieza pronto", closed: "Cerrada", final: "Resultado final",
    votes_one: "{n} voto", votes_other: "{n} votos", watching_one: "{n} mirando", watching_other: "{n} mirando",
    perMinute: "{n} votos por minuto",
    closesIn: "Cierra en {d}", closesAt: "Cierra {when}", opensIn: "Abre en {d}", closedAt: "Cerró {when}",
    waitOpen: "Los botones se activan cuando abra la votación.",
    tapToVote: "Toca una opción para votar.", yourVote: "Tu voto: {option} — toca otra para cambiarlo.",
    voteClosed: "La votación ha cerrado.", counting: "Contando los últimos votos…",
    late: "Tu voto llegó después del cierre: se guarda, no se cuenta.", notCounted: "No contado: {reason}",
    outcomeUnknown: "No pudimos confirmar que tu voto se contara: el servidor no dio una respuesta clara en 30 segundos. Vuelve a tocar tu opción para asegurarte; un voto enviado dos veces cuenta una vez.",
    tokenRefused: "No contado: el pase de voto de este móvil no vale en esta red, y tampoco se aceptó uno nuevo. Recarga la página para intentarlo de nuevo.",
    puzzleFailed: "No contado: la comprobación que este móvil resuelve antes de votar fue rechazada tres veces. Recarga la página para intentarlo de nuevo.",
    stampAhead: "No contado: el reloj del servidor no coincidía con el último voto de este móvil. Vuelve a tocar tu opción para votar.",
    hiddenResults: "Los resultados están ocultos hasta que el presentador los revele. Tu voto cuenta igual.",
    winner: "Gana: {option}", tie: "Empate: {options}", and: " y ",
    leads: "{option} va en cabeza", overtakes: "{option} supera a {passed}", milestone: "¡{n} votos!",
    certified: "Resultado certificado", digest: "Huella", details: "Detalles",
    transport: "Conexión: {t}", servedBy: "Servido por la región {r}", regionLive: "{r}: al día", regionBehind: "{r}: {s} s de retraso",
    regionLost: "{r}: sin contacto", reconnecting: "Reconectando en {s} s…",
    option: "{label}: {n} votos, {p} por ciento", optionHidden: "{label}",
    scanToVote: "Escanea para votar", today: "hoy a las {t}",
    enterCodeAt: "o escribe este código en {host}:", haveCode: "¿Tienes un código?", joinButton: "Entrar",
    noSuchCode: "Ninguna votación ni concurso tiene el código {code}. Compruébalo en la pantalla.", badCode: "Un código son seis letras y cifras, como en la pantalla.",
    scanToJoin: "Escanea para unirte", joinNow: "Únete desde tu móvil: la primera pregunta llega pronto.", quizLobby: "Únete ya",
    answersWord_one: "respuesta", answersWord_other: "respuestas", noAnswers: "No se contó ninguna respuesta.", newestJoined: "Los últimos en unirse",
    answerLocked: "Respuesta bloqueada", lockedWait: "Espera a la revelación.", verdictRight: "¡Correcto!", verdictWrong: "Esta vez no",
    pointsEarned: "+{n} puntos", rankNow: "Puesto {rank} de {n}", yourVoteTag: "Tu voto", nameRefused: "Ese nombre no se puede usar ({why}); elige otro.",
    hiddenAfter: "Los resultados están ocultos hasta que el presentador los revele.", resultsSoon: "Resultados tras la revelación",
    votingClosed: "La votación ha cerrado", others: "Otras ({n})", showingOf: "se muestran {n} de {total} opciones",
    noSuchOptions: "no hay opción {ids} en esta encuesta: se muestran todas", certifiedMark: "✓ Certificado",
    localAddress: "Este código QR apunta a {host}, que los móviles no alcanzan. Arranca el nodo con --public-url.",
    guessedAddress: "El código QR usa la dirección de esta pantalla; usa --public-url si el público llega al nodo por otra.",
    host: "Presentador", adminToken: "Token de administración", question: "Pregunta", optionsPerLine: "Opciones, una por línea",
    openFor: "Abierta durante (segundos)", opensAtLabel: "Abre el (vacío: ahora)", eventLabel: "Evento (agrupa las encuestas de un programa; opcional)",
    hideLabel: "Ocultar los resultados hasta que los revele", create: "Crear encuesta",
    closeNow: "Cerrar ahora", reallyClose: "¿Cerrar esta encuesta ahora? Los votos posteriores no cuentan.", yesClose: "Sí, cerrarla",
    cancel: "Cancelar", extend: "Añadir {s} s", reveal: "Revelar los resultados", revealed: "Los resultados son visibles para todos.",
    hiddenHost: "Oculto a los espectadores. Tú ves los recuentos.", exportCSV: "Exportar CSV", exportJSON: "Exportar JSON",
    nextQuestion: "Siguiente pregunta: {q}", eventPolls: "Evento {e}", finalCertified: "Resultado final certificado.",
    closedFinal: "Cerrada. Certificando…", presenter: "Pantalla del plató", overlay: "Rótulo en antena", embed: "Insertar",
    quiz: "Concurso", quizWaiting: "Esperando a que el presentador empiece el concurso.", quizEnded: "El concurso ha terminado.",
    questionOf: "Pregunta {n} de {total}", secondsLeft: "Quedan {s} s", timeUp: "Se acabó el tiempo.",
    answered: "Respuesta enviada: {option}, en {s} s.", correct: "¡Correcto! +{n} puntos.", incorrect: "Esta vez no: la respuesta era {answer}.",
    answerWas: "La respuesta era {answer}.", leaderboard: "Clasificación", finalStandings: "Clasificación final",
    yourScore: "Tú: {score} puntos, puesto {rank} de {n}.", points: "{n} puntos", rankUp: "▲ sube {n}", rankDown: "▼ baja {n}",
    tooLate: "Demasiado tarde: la pregunta ya estaba cerrada cuando llegó tu respuesta. No cuenta.",
    startNext: "Empezar la siguiente pregunta", closeQuestion: "Cerrar la pregunta", revealAnswer: "Revelar la respuesta",
    endQuiz: "Terminar el concurso", questions: "Preguntas", skipped: "omitida (nunca planteada)", hiddenShort: "respuesta oculta",
    studioPreview: "Vista previa de la pantalla del plató", studioScreen: "Pantalla del plató", hostKeys: "Teclas: S siguiente pregunta · C cerrar · R revelar · E terminar (dos veces).",
    tokenNeeded: "Introduce el token de administración para dirigir este concurso (el nodo lo guarda en su directorio de datos, admin-token).", useToken: "Usar este token",
    tokenNeededPoll: "Introduce el token de administración para dirigir esta votación (el nodo lo guarda en su directorio de datos, admin-token).",
    pressAgainToEnd: "Pulsa E otra vez en 3 segundos para terminar el concurso.", joined: "{n} conectados", notStarted: "sin empezar", participantPage: "Página de los participantes",
    quizState_ready: "Listo: {total} preguntas, ninguna empezada.", quizState_question: "La pregunta {n} de {total} está abierta.",
    quizState_between: "La pregunta {n} de {total} está cerrada.", quizState_ended: "El concurso ha terminado.",
    yourName: "Tu nombre en la clasificación", anonymous: "Anónimo",
    receiptChecking: "Comprobando tu voto en el resultado certificado…",
    receiptCounted: "Tu voto está en el resultado certificado ✓", receiptProof: "Ver la prueba",
    receiptSuperseded: "Sustituido por tu voto posterior por {option}, que es el que cuenta ✓",
    receiptLate: "Tu voto llegó después del cierre: está en el registro, pero no cuenta.",
    receiptFiltered: "Tu voto está en el registro pero no se contó: los controles de votación lo apartaron.",
    receiptRepeat: "No contado: un voto anterior con la misma clave cuenta en su lugar.",
    receiptUnknown: "Tu voto no está en el resultado certificado: el servidor no tiene constancia de él.",
    receiptUnchecked: "No se pudo comprobar tu voto: {why}.",
    receiptStep_malformed: "el recibo o su prueba están dañados", receiptStep_signature: "la firma del recibo no es la del servidor",
    receiptStep_certificate: "la prueba no es la del resultado certificado", receiptStep_record: "el registro de la prueba no es tu voto",
    receiptStep_path: "la prueba no lleva al resultado", receiptStep_root: "la prueba lleva a un resultado distinto del certificado",
    receiptStep_pending: "las pruebas del resultado aún no están listas", receiptStep_network: "el servidor no respondió",
    receiptStep_unsupported: "este navegador no puede comprobar firmas con esta conexión",
  },
};
// ?lang= on any view wins over the browser's (a playout PC's browser
// speaks whatever it was installed with).
export const LANG = [new URLSearchParams(location.search).get("lang") || "", ...(navigator.languages || [navigator.language || "en"])]
  .map(l => String(l).slice(0, 2).toLowerCase()).find(l => STRINGS[l]) || "en";
document.documentElement.lang = LANG;

// t returns the string key in the page's language with {names} filled in.
export function t(key, vars = {}) {
  const s = (STRINGS[LANG] && STRINGS[LANG][key]) || STRINGS.en[key] || key;
  return s.replace(/\{(\w+)\}/g, (_, k) => (k in vars ? vars[k] : `{${k}}`));
}
export const num = n => Number(n).toLocaleString(LANG);
export const plural = (key, n) => t(`${key}_${n === 1 ? "one" : "other"}`, { n: num(n) });

// duration says ms as a viewer reads a countdown: 1:05, 12:00, 2:03:00, 3 d.
export function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s >= 2 * 86400) return `${Math.floor(s / 86400)} d`;
  const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), r = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${r}` : `${m}:${r}`;
}

// when says a time with its date unless it is today.
export function when(ms) {
  const d = new Date(ms), now = new Date();
  const time = d.toLocaleTimeString(LANG, { hour: "2-digit", minute: "2-digit" });
  if (d.toDateString() === now.toDateString()) return t("today", { t: time });
  return d.toLocaleString(LANG, { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
}
